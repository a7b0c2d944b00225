"""Marin-style training script, kept light: documents -> tokenized -> model -> evaluation as small JSON steps.

Run: ``python -m experiments.train_small --prefix DIR`` from the project folder.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class StageConfig:
    """One stage: what it writes and what it reads."""

    output_path: str
    stage: str
    params: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)


def run_stage(config: StageConfig) -> dict[str, object]:
    """Write ``out.json`` naming the stage, its parameters and its inputs."""
    record = {"stage": config.stage, "params": config.params, "inputs": list(config.inputs)}
    atomic_write_text(f"{config.output_path}/out.json", json.dumps(record))
    return {"stage": config.stage, "inputs": len(config.inputs)}


documents = ExecutorStep(
    name="documents/small",
    fn=run_stage,
    config=StageConfig(this_output_path(), "documents", {"count": versioned(100)}),
    description="A hundred tiny documents",
)
tokenized = ExecutorStep(
    name="tokenized/small",
    fn=run_stage,
    config=StageConfig(this_output_path(), "tokenize", {"vocab": versioned(256)}, [output_path_of(documents)]),
)


def train_step(learning_rate: float) -> ExecutorStep:
    """The model trained on the tokenized documents at ``learning_rate`` (a sweep varies it)."""
    return ExecutorStep(
        name="checkpoints/small",
        fn=run_stage,
        config=StageConfig(this_output_path(), "train", {"lr": versioned(learning_rate)}, [output_path_of(tokenized)]),
    )


model = train_step(1e-3)
evaluation = ExecutorStep(
    name="evaluation/small",
    fn=run_stage,
    config=StageConfig(this_output_path(), "eval", {"tasks": versioned(["ppl"])}, [output_path_of(model)]),
)

if __name__ == "__main__":
    # Like Marin's own scripts, the main block may do things a code location must never do.
    if os.environ.get("MAIN_BLOCK_MARKER"):
        atomic_write_text(os.environ["MAIN_BLOCK_MARKER"], "the main block ran")
    executor_main(steps=[evaluation], description="Small training run")
