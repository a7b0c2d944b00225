"""Uses a registry dataset that is not on this machine: fails when run, naming it."""

from marin.execution.executor import executor_main

from experiments.defaults import default_count
from experiments.pretraining_datasets import big_web

count = default_count("team/big_web_lines", big_web)

if __name__ == "__main__":
    executor_main(steps=[count], description="count the big web dataset")
