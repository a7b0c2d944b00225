"""A script whose steps exist only inside its main block: the code location cannot see them."""

from __future__ import annotations

from marin_assets.execution import executor_main

if __name__ == "__main__":
    from experiments.train_small import evaluation

    executor_main(steps=[evaluation])
