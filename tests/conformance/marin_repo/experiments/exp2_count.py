"""Reads a dataset of the team's registry and counts its lines (the team's default_count)."""

from marin.execution.executor import executor_main

from experiments.defaults import default_count
from experiments.pretraining_datasets import tiny_web

count = default_count("team/tiny_web_lines", tiny_web)

if __name__ == "__main__":
    executor_main(steps=[count], description="count the tiny web dataset")
