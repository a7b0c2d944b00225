"""Hello world: make numbers, compute their statistics, write a short report.

Run: ``python -m marin_assets.experiments.hello_world [--prefix DIR] [--dry_run]``.
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass

import fsspec

from marin_assets.execution import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.metadata import markdown
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class GenerateNumbersConfig:
    """How many pseudo-random numbers to write, and from which seed."""

    output_path: StepPath
    n: int
    seed: int


def generate_numbers(config: GenerateNumbersConfig) -> dict[str, int]:
    """Write ``n`` seeded random integers to ``numbers.json``."""
    rng = random.Random(config.seed)
    numbers = [rng.randint(0, 1000) for _ in range(config.n)]
    atomic_write_text(f"{config.output_path}/numbers.json", json.dumps(numbers))
    return {"count": len(numbers)}


@dataclass(frozen=True)
class ComputeStatsConfig:
    """Where the numbers are and where the statistics go."""

    input_path: StepPath
    output_path: StepPath


def compute_stats(config: ComputeStatsConfig) -> dict[str, object]:
    """Compute mean, median, min, max of the numbers and write ``stats.json``."""
    with fsspec.open(f"{config.input_path}/numbers.json", "r") as handle:
        numbers = json.load(handle)
    stats = {
        "count": len(numbers),
        "mean": statistics.fmean(numbers),
        "median": statistics.median(numbers),
        "min": min(numbers),
        "max": max(numbers),
    }
    atomic_write_text(f"{config.output_path}/stats.json", json.dumps(stats, indent=2))
    table = "| statistic | value |\n|---|---|\n" + "\n".join(f"| {k} | {v:g} |" for k, v in stats.items())
    return {**stats, "summary": markdown(table)}


def build_steps(n: int = 1000, seed: int = 0) -> list[ExecutorStep]:
    """The hello-world experiment: numbers -> stats."""
    numbers = ExecutorStep(
        name="hello_world/numbers",
        fn=generate_numbers,
        config=GenerateNumbersConfig(output_path=this_output_path(), n=versioned(n), seed=versioned(seed)),
        description="Seeded random integers",
    )
    stats = ExecutorStep(
        name="hello_world/stats",
        fn=compute_stats,
        config=ComputeStatsConfig(input_path=output_path_of(numbers), output_path=this_output_path()),
        description="Mean, median, min and max of the numbers",
    )
    return [numbers, stats]


STEPS = build_steps()
# Group "hello_world" in the code location, with a job hello_world_job.
EXPERIMENT = Experiment(steps=STEPS, description="Numbers and their statistics")

if __name__ == "__main__":
    executor_main(STEPS, description="Hello world: numbers and their statistics")
