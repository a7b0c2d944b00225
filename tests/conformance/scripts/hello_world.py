"""Marin's hello-world tutorial shape: generate numbers, compute their statistics."""

import json
import os
import random
from dataclasses import dataclass

from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned


@dataclass(frozen=True)
class GenerateDataConfig:
    random_seed: int
    n: int
    output_path: str


def generate_data(config: GenerateDataConfig):
    random.seed(config.random_seed)
    numbers = [random.randint(0, 100) for _ in range(config.n)]
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "numbers.json"), "w") as f:
        json.dump(numbers, f)


@dataclass(frozen=True)
class ComputeStatsConfig:
    input_path: str
    output_path: str


def compute_stats(config: ComputeStatsConfig):
    with open(config.input_path) as f:
        numbers = json.load(f)
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "stats.json"), "w") as f:
        json.dump({"mean": sum(numbers) / len(numbers), "max": max(numbers)}, f)


generate_data_step = ExecutorStep(
    name="hello_world/data",
    fn=generate_data,
    config=GenerateDataConfig(random_seed=versioned(0), n=versioned(100), output_path=this_output_path()),
)

compute_stats_step = ExecutorStep(
    name="hello_world/stats",
    fn=compute_stats,
    config=ComputeStatsConfig(
        input_path=output_path_of(generate_data_step, "numbers.json"),
        output_path=this_output_path(),
    ),
)

if __name__ == "__main__":
    executor_main(steps=[compute_stats_step], description="Hello world: numbers and their statistics.")
