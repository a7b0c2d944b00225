"""Marin's hello-world shape, plus a name the team does not keep (experiments.simple_train_config)."""

import json
import os
from dataclasses import dataclass

from fray.cluster import ResourceConfig
from marin.execution.executor import ExecutorStep, executor_main, this_output_path, versioned

from experiments.defaults import TEAM_DEFAULTS
from experiments.simple_train_config import SimpleTrainConfig


@dataclass(frozen=True)
class HelloConfig:
    greeting: str
    output_path: str


def say_hello(config: HelloConfig) -> None:
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "hello.json"), "w") as handle:
        json.dump({"greeting": config.greeting, "defaults": TEAM_DEFAULTS}, handle)


TRAIN = SimpleTrainConfig(
    resources=ResourceConfig.with_cpu(), train_batch_size=4, num_train_steps=10, learning_rate=1e-3
)

hello = ExecutorStep(
    name="team/hello", fn=say_hello, config=HelloConfig(greeting=versioned("hi"), output_path=this_output_path())
)

if __name__ == "__main__":
    executor_main(steps=[hello], description="hello from the team's repository")
