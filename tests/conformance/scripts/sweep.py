"""A 2x2 sweep in Marin's style: one step name, four versions, and a summary over all of them."""

import json
import os
from dataclasses import dataclass

from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned


@dataclass(frozen=True)
class DataConfig:
    output_path: str
    size: int


def make_data(config: DataConfig):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "data.json"), "w") as f:
        json.dump(list(range(config.size)), f)


@dataclass(frozen=True)
class TrainConfig:
    data_path: str
    output_path: str
    learning_rate: float
    batch_size: int


def fake_train(config: TrainConfig):
    with open(os.path.join(config.data_path, "data.json")) as f:
        data = json.load(f)
    loss = 1.0 / (1 + config.learning_rate * config.batch_size * len(data))
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "loss.json"), "w") as f:
        json.dump({"loss": loss}, f)


@dataclass(frozen=True)
class SummaryConfig:
    runs: list
    output_path: str


def summarize(config: SummaryConfig):
    losses = {}
    for run in config.runs:
        with open(os.path.join(run, "loss.json")) as f:
            losses[os.path.basename(run)] = json.load(f)["loss"]
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "summary.json"), "w") as f:
        json.dump(losses, f)


data = ExecutorStep(
    name="sweep/data", fn=make_data, config=DataConfig(output_path=this_output_path(), size=versioned(10))
)

runs = [
    ExecutorStep(
        name="sweep/train",
        fn=fake_train,
        config=TrainConfig(
            data_path=output_path_of(data),
            output_path=this_output_path(),
            learning_rate=versioned(lr),
            batch_size=versioned(bs),
        ),
    )
    for lr in (1e-3, 3e-3)
    for bs in (8, 16)
]

summary = ExecutorStep(
    name="sweep/summary",
    fn=summarize,
    config=SummaryConfig(runs=[output_path_of(run) for run in runs], output_path=this_output_path()),
)

if __name__ == "__main__":
    executor_main(steps=[*runs, summary])
