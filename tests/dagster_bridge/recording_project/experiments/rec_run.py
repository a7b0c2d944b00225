"""Two drops, a slow "training" that logs Levanter-style metric records, an evaluation of it and an
unrelated step: what the recording tests run from the command line.

``$REC_TRAIN_SLEEP_S`` is how long the training sleeps; ``$REC_TRAIN_FAILS=1`` makes it fail.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.step import this_partition
from marin_assets.execution.storage import atomic_write_text

DROPS = ["a", "b"]


@dataclass(frozen=True)
class DropConfig:
    output_path: str
    drop: str
    value: int = 1


@dataclass(frozen=True)
class CombineConfig:
    output_path: str
    inputs: Any = field(default_factory=list)


def per_drop(config: DropConfig) -> dict[str, int]:
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": config.value}))
    return {"total": config.value}


def train(config: CombineConfig) -> dict[str, int]:
    time.sleep(float(os.environ.get("REC_TRAIN_SLEEP_S", "0")))
    if os.environ.get("REC_TRAIN_FAILS") == "1":
        raise RuntimeError("planned training failure")
    # Levanter's json_logger records, as a training step's train.log holds them.
    records = [
        {"tracker": "json_logger", "event": "log", "step": step, "metrics": {"train/loss": 5.0 - step}}
        for step in (1, 2, 3)
    ]
    log = "".join(f"INFO levanter: {json.dumps(record)}\n" for record in records)
    atomic_write_text(os.path.join(config.output_path, "train.log"), "starting\n" + log)
    total = len(config.inputs)
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": total}))
    return {"total": total}


def combine(config: CombineConfig) -> dict[str, int]:
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": 1}))
    return {"total": 1}


drop = ExecutorStep(
    "rec/per_drop", per_drop, DropConfig(this_output_path(), this_partition(), versioned(1)), partitioned_by="drops"
)
model = ExecutorStep("rec/train", train, CombineConfig(this_output_path(), drop.partitions()))
evaluation = ExecutorStep("rec/evaluate", combine, CombineConfig(this_output_path(), [output_path_of(model)]))
side = ExecutorStep("rec/side", combine, CombineConfig(this_output_path(), [versioned("unrelated")]))

EXPERIMENT = Experiment(steps=[evaluation, side], partitions={"drops": DROPS})

if __name__ == "__main__":
    executor_main(steps=EXPERIMENT.steps, partitions=EXPERIMENT.partitions)
