"""A step that reads a checkpoint of a training step without waiting for it (``.nonblocking()``):
Marin versions the training step as a pseudo-dependency and does not run it."""

import json
import os
from dataclasses import dataclass

from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned


@dataclass(frozen=True)
class TrainConfig:
    output_path: str
    steps: int


def long_training(config: TrainConfig):
    raise RuntimeError("the training step must not run: it is only a non-blocking dependency")


@dataclass(frozen=True)
class PeekConfig:
    checkpoint: str
    output_path: str


def peek(config: PeekConfig):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "peek.json"), "w") as f:
        json.dump({"checkpoint": config.checkpoint, "exists": os.path.exists(config.checkpoint)}, f)


train = ExecutorStep(
    name="nonblocking/train",
    fn=long_training,
    config=TrainConfig(output_path=this_output_path(), steps=versioned(1000)),
)

peek_step = ExecutorStep(
    name="nonblocking/peek",
    fn=peek,
    config=PeekConfig(
        checkpoint=output_path_of(train, "checkpoints/step-100").nonblocking(), output_path=this_output_path()
    ),
)

if __name__ == "__main__":
    executor_main(steps=[peek_step])
