"""Marin's ``train_test_overlap.run_data_overlap``: n-gram overlap of evaluation scenarios with training data.

``run_data_overlap(DataOverlapPipelineConfig(input_data, scenario_data, output_path, N=[5, 9, 13]))`` reads the
training documents below ``input_data`` (JSON lines, ``text``; a single file too) and the evaluation
scenarios of ``scenario_data`` (HELM's light-scenario JSON lines: ``{"scenario_key": ..., "instances": [{"id",
"input", "references": [...]}]}``), and for each ``n`` in ``N`` writes
``<output_path>/stats/<n>.jsonl`` with one record per scenario (HELM's ``DataOverlapStats`` fields)::

    {"data_overlap_stats_key": {"light_scenario_key": ..., "overlap_protocol_spec": {"n": n}},
     "num_instances": ..., "instance_ids_with_overlapping_input": [...],
     "instance_ids_with_overlapping_reference": [...]}

Text is compared as lower-cased word n-grams (``\\w+`` tokens). The training n-grams of one ``n`` are held in
memory as 64-bit hashes; ``processes`` is Marin's worker count, accepted. A line of ``scenario_data`` that is
not a scenario fails the step naming the file and line.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.core.io import iter_records, write_jsonl_shard
from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import filesystem, join_path

_WORD = re.compile(r"\w+")
TRAINING_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl", ".json.gz")


@dataclass
class DataOverlapPipelineConfig:
    """Marin's fields (``processes`` accepted)."""

    input_data: StepPath
    scenario_data: StepPath
    output_path: StepPath
    N: list[int] = field(default_factory=lambda: [5, 9, 13])
    processes: int = 1


def _ngram_hashes(text: str, n: int) -> set[int]:
    tokens = _WORD.findall(text.lower())
    return {
        int.from_bytes(hashlib.blake2b(" ".join(tokens[i : i + n]).encode(), digest_size=8).digest(), "little")
        for i in range(len(tokens) - n + 1)
    }


def _training_files(path: str) -> list[str]:
    fs, p = filesystem(path)
    if fs.isfile(p):
        return [path]
    return sorted({s for suffix in TRAINING_SUFFIXES for s in find_shards(path, suffix)})


def _scenarios(path: str) -> Iterator[dict[str, Any]]:
    for line, record in iter_records(path):
        if not isinstance(record, dict) or not isinstance(record.get("instances"), list):
            raise ValueError(f"{path}:{line}: not a light scenario (no 'instances' list)")
        yield record


def run_data_overlap(config: DataOverlapPipelineConfig) -> dict[str, Any]:
    """Step function (Marin's name): the overlap statistics per ``n``; returns counts.

    Raises:
        FileNotFoundError: no training files below ``input_data``.
        ValueError: a malformed scenario line (file and line named).
    """
    files = _training_files(step_path(config.input_data))
    if not files:
        raise FileNotFoundError(f"no training documents (JSON lines) below {config.input_data}")
    scenarios = list(_scenarios(step_path(config.scenario_data)))
    summary: dict[str, Any] = {"training_files": len(files), "scenarios": len(scenarios)}
    for n in config.N:
        seen: set[int] = set()
        for path in files:
            for _, doc in iter_records(path):
                if isinstance(doc, dict) and isinstance(doc.get("text"), str):
                    seen |= _ngram_hashes(doc["text"], n)
        stats = []
        overlapping = 0
        for scenario in scenarios:
            inputs, references = [], []
            for instance in scenario["instances"]:
                if _ngram_hashes(str(instance.get("input", "")), n) & seen:
                    inputs.append(instance.get("id"))
                if any(_ngram_hashes(str(ref), n) & seen for ref in instance.get("references") or []):
                    references.append(instance.get("id"))
            overlapping += len(inputs)
            stats.append({
                "data_overlap_stats_key": {"light_scenario_key": scenario.get("scenario_key"),
                                           "overlap_protocol_spec": {"n": n}},
                "num_instances": len(scenario["instances"]),
                "instance_ids_with_overlapping_input": inputs,
                "instance_ids_with_overlapping_reference": references,
            })  # fmt: skip
        write_jsonl_shard(join_path(step_path(config.output_path), f"stats/{n}.jsonl"), stats)
        summary[f"overlapping_inputs_{n}"] = overlapping
    return summary
