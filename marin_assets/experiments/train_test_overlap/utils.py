"""Marin's ``experiments/train_test_overlap/utils.py``: train/test overlap shard by shard.

``run_all_shards(ShardedDedupeConfig(dataset_dir, output_path, eval_dataset_steps=[...]))`` runs, for every
training shard below ``dataset_dir`` (:func:`find_dataset_shards`), a ``dedupe`` in
``DedupMode.TRAIN_TEST_OVERLAP`` of the evaluation sets against that shard (:func:`make_task` from
:data:`BASE_DEDUPE_CONFIG`: 15-grams, any overlap), its attributes at ``<output_path>/<shard path without
extension>/``. Marin's Ray knobs (``max_in_flight``, ``num_cpus``, ``memory``, ``resources``,
``unified_resources``) are accepted; the shards run one after another in the step, each ``dedupe`` on the
engine's shard pool. Marin's ``EVAL_DATASET_STEPS`` (its converted evaluation sets,
``experiments/train_test_overlap/eval_datasets_overlap.py``) are not built in: pass your own steps or paths.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.processing.classification.dedupe import DedupeConfig, DedupMode, NGramConfig, dedupe

logger = logging.getLogger(__name__)

SUPPORTED_SHARD_EXTENSIONS: tuple[str, ...] = (".parquet", ".jsonl.gz", ".jsonl.zst", ".jsonl", ".json.gz", ".json.zst")
ALLOWED_TPU_TYPES: tuple[str, ...] = ("v4-8", "v5p-8", "v6e-4")


@dataclass(frozen=True)
class UnifiedResources:
    """Marin's one description of a task's Ray resources (kept for its scripts)."""

    tpu_type: str | None = None
    tpu_head_fraction: float | None = None
    tpus: int | None = None
    num_cpus: int | None = None
    memory: int | None = None
    extra: dict[str, float] | None = None

    def to_ray_overrides(self) -> dict[str, Any]:
        """Ray task options (``num_cpus``, ``memory``, ``resources``) as Marin builds them.

        Raises:
            ValueError: a TPU head fraction for a TPU type Marin does not allow.
        """
        overrides: dict[str, Any] = {}
        resources: dict[str, float] = {}
        if self.num_cpus is not None:
            overrides["num_cpus"] = self.num_cpus
        if self.memory is not None:
            overrides["memory"] = self.memory
        if self.tpu_type and self.tpu_head_fraction is not None:
            if self.tpu_type not in ALLOWED_TPU_TYPES:
                raise ValueError(f"Unsupported tpu_type '{self.tpu_type}'. Allowed: {', '.join(ALLOWED_TPU_TYPES)}")
            resources[f"TPU-{self.tpu_type}-head"] = self.tpu_head_fraction
        if self.tpus is not None:
            resources["TPU"] = float(self.tpus)
        resources.update(self.extra or {})
        if resources:
            overrides["resources"] = resources
        return overrides


@dataclass(frozen=True)
class DatasetConfig:
    """One training dataset to check (Marin's fields)."""

    name: str
    path: str
    max_in_flight: int
    text_field: str = "text"


@dataclass(frozen=True)
class ShardedDedupeConfig:
    """Marin's config of :func:`run_all_shards` (same fields)."""

    dataset_dir: StepPath
    output_path: StepPath
    max_in_flight: int = 16
    eval_dataset_steps: list[Any] | None = None
    text_field: str = "text"
    processes: int | None = None
    num_cpus: int | None = None
    memory: int | None = None
    resources: dict[str, float] | None = None
    unified_resources: UnifiedResources | None = None
    temp_dir: StepPath | None = None
    debug: bool = False


BASE_DEDUPE_CONFIG = DedupeConfig(
    input_path="",
    output_path="",
    attribute_name="ngram_overlap",
    false_positive_rate=1e-20,
    ngram=NGramConfig(ngram_length=[15], overlap_threshold=1e-6, stride=0),
    processes=15,
    mode=DedupMode.TRAIN_TEST_OVERLAP,
    decontaminate_source="",
    num_cpus=15,
    memory=16 * 1024 * 1024 * 1024,
)


def find_dataset_shards(root_dir: str) -> list[str]:
    """Every shard below ``root_dir`` with a supported extension, sorted.

    Raises:
        FileNotFoundError: none found.
    """
    matches = sorted({p for ext in SUPPORTED_SHARD_EXTENSIONS for p in find_shards(root_dir, ext)})
    if not matches:
        raise FileNotFoundError(
            f"No shard files with extensions ({', '.join(SUPPORTED_SHARD_EXTENSIONS)}) found under {root_dir}"
        )
    return matches


def _strip_extension(path: str) -> str:
    for ext in SUPPORTED_SHARD_EXTENSIONS:
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def get_relative_path_no_extension(shard_path: str, dataset_dir: str) -> str:
    """``shard_path`` relative to ``dataset_dir`` without its extension (its base name when not below it)."""
    dataset_dir = dataset_dir.rstrip("/")
    if shard_path.startswith(dataset_dir + "/"):
        return _strip_extension(shard_path[len(dataset_dir) + 1 :])
    return _strip_extension(os.path.basename(shard_path))


def clean_shard_basename(shard_path: str) -> str:
    """The shard's file name without its extension."""
    return _strip_extension(os.path.basename(shard_path))


def make_task(
    shard_path: str,
    base_output_path: str,
    dataset_dir: str,
    eval_dataset_steps: list[Any],
    text_field: str,
    base_config: DedupeConfig = BASE_DEDUPE_CONFIG,
    temp_dir: str | None = None,
    debug: bool = False,
) -> DedupeConfig:
    """The ``dedupe`` config of one training shard: the evaluation sets checked against it."""
    relative = get_relative_path_no_extension(shard_path, dataset_dir)
    eval_paths = list(eval_dataset_steps)
    changes: dict[str, Any] = {
        "input_path": eval_paths[0] if len(eval_paths) == 1 else eval_paths,
        "output_path": os.path.join(base_output_path, relative),
        "decontaminate_source": shard_path,
        "text_field": text_field,
        "debug": debug,
    }
    if temp_dir is not None:
        changes["temp_dir"] = temp_dir
    return dataclasses.replace(base_config, **changes)


def run_all_shards(config: ShardedDedupeConfig) -> str:
    """Step function (Marin's name): the overlap of the evaluation sets with every training shard.

    Raises:
        ValueError: no ``eval_dataset_steps``.
        FileNotFoundError: no shards below ``dataset_dir``.
    """
    if not config.eval_dataset_steps:
        raise ValueError("ShardedDedupeConfig.eval_dataset_steps is empty: give the evaluation sets (steps or paths)")
    dataset_dir, output_path = step_path(config.dataset_dir), step_path(config.output_path)
    temp_dir = None if config.temp_dir is None else step_path(config.temp_dir)
    shards = find_dataset_shards(dataset_dir)
    base = (
        BASE_DEDUPE_CONFIG
        if config.processes is None
        else dataclasses.replace(BASE_DEDUPE_CONFIG, processes=config.processes)
    )
    for shard in shards:
        dedupe(make_task(shard, output_path, dataset_dir, config.eval_dataset_steps, config.text_field, base,
                         temp_dir, config.debug))  # fmt: skip
    return f"Sharded dedupe pipeline completed! Processed {len(shards)} shards."
