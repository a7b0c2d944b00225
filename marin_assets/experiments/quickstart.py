"""The quickstart pipeline (placeholder until the data and model stages land: hello world)."""

from marin_assets.execution import executor_main
from marin_assets.experiments.hello_world import build_steps

STEPS = build_steps()

if __name__ == "__main__":
    executor_main(STEPS, description="Quickstart")
