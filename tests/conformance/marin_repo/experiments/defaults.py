"""The team's defaults, in the shape of Marin's experiments/defaults.py (Marin's imports)."""

import json
import os
from dataclasses import dataclass
from typing import Any

from marin.download.huggingface.download_hf import DownloadConfig, download_hf
from marin.execution.executor import ExecutorStep, InputName, this_output_path

TEAM_DEFAULTS = "the team's experiments.defaults"


def default_download(
    name: str, hf_dataset_id: str, revision: str, override_output_path: str | None = None, **kwargs: Any
) -> InputName:
    """As in Marin: nothing versioned unless the caller versions it; returns the InputName."""
    step = ExecutorStep(
        name=name,
        description=f"Download {hf_dataset_id} revision {revision}",
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=hf_dataset_id,
            revision=revision,
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
            **kwargs,
        ),
        override_output_path=override_output_path,
    )
    return step.as_input_name()


@dataclass(frozen=True)
class CountConfig:
    input_path: str
    output_path: str


def count_lines(config: CountConfig) -> None:
    """Counts the lines of every .jsonl file under ``input_path``."""
    total = 0
    for folder, _, names in os.walk(config.input_path):
        for name in names:
            if name.endswith(".jsonl"):
                with open(os.path.join(folder, name)) as handle:
                    total += sum(1 for _ in handle)
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "count.json"), "w") as handle:
        json.dump({"lines": total, "by": TEAM_DEFAULTS}, handle)


def default_count(name: str, data: InputName) -> ExecutorStep:
    return ExecutorStep(name=name, fn=count_lines, config=CountConfig(input_path=data, output_path=this_output_path()))
