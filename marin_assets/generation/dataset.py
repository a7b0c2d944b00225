"""Marin's ``marin.generation.dataset``: labelled training examples, sampled per label.

:class:`DatasetSampler` (``input_path``, ``output_path``, ``label_weights``) keeps, of every file of
``{"text", "label"}`` examples below ``input_path``, the share ``label_weights[label]`` of each label (a
label not listed is dropped) and writes them to the same relative path below ``output_path``. Which
examples are kept is fixed by a hash of ``(seed, id or text)`` -- the same inputs always give the same
sample (Marin draws with ``random.sample``). Files are written atomically, one task per file.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from marin_assets.classifiers.utils import sample_key
from marin_assets.core.io import JsonlShardWriter, iter_records
from marin_assets.core.shard_stage import Counters, Quarantine, ShardResult, ShardStage, find_shards
from marin_assets.execution.storage import join_path

EXAMPLE_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl")


class _SampleStage(ShardStage):
    stage = "datashop_sample"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, sampler: DatasetSampler) -> None:
        super().__init__(sampler.input_path, sampler.output_path)
        self.sampler = sampler

    def shards(self) -> list[str]:
        return sorted({s for suffix in EXAMPLE_SUFFIXES for s in find_shards(self.input_path, suffix)})

    def cleared_dirs(self, shards: list[str]) -> list[str]:
        return []  # each file is rewritten whole by its task

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        weights = self.sampler.label_weights
        kept: Counter[str] = Counter()
        with JsonlShardWriter(join_path(self.output_path, self.relative_path(shard))) as writer:
            for line, example in iter_records(shard):
                counters.add("documents_in")
                label = example.get("label") if isinstance(example, dict) else None
                if label is None:
                    quarantine.add("no_label", "example has no label", line=line)
                    continue
                weight = weights.get(label, weights.get(str(label), 0.0))
                key = str(example.get("id") or example.get("text", ""))
                if weight > 0 and sample_key(self.sampler.seed, key) < weight:
                    writer.write(example)
                    kept[str(label)] += 1
        counters.add("documents_out", writer.records)
        return {"kept": dict(kept)}

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        total: Counter[str] = Counter()
        for r in results:
            total.update(r.extra["kept"] if r.extra else {})
        return {"kept_per_label": dict(sorted(total.items()))}


class DatasetSampler:
    """Sample labelled examples per label (Marin's class; deterministic here, see the module docstring)."""

    def __init__(self, input_path: str, output_path: str, label_weights: dict[Any, float], seed: int = 0) -> None:
        self.input_path = input_path
        self.output_path = output_path
        self.label_weights = label_weights
        self.seed = seed

    def sample_dataset(self) -> dict[str, Any]:
        """Write the sample; returns the stage's metadata (``kept_per_label`` among it)."""
        return _SampleStage(self).run()
