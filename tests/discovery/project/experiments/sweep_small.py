"""A learning-rate sweep over the training script's model: lr 1e-3 is the training script's own step."""

from __future__ import annotations

from experiments.train_small import train_step

from marin_assets.execution import executor_main

RUNS = [train_step(lr) for lr in (1e-3, 3e-3)]

if __name__ == "__main__":
    executor_main(steps=RUNS, description="Learning-rate sweep")
