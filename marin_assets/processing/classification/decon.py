"""Marin's ``marin.processing.classification.decon``: decontamination and train/test overlap.

``decontaminate(DeconConfig(input_path, output_path, attribute_name, estimated_doc_count,
false_positive_rate, ngram, processes, mode, decontaminate_source, text_field))`` with

* ``DeconMode.DECONTAMINATE``: marks each paragraph of the input found in ``decontaminate_source``
  (``ngram=None``: whole paragraphs; with ``ngram``: the share of its word n-grams found there);
* ``DeconMode.TRAIN_TEST_OVERLAP`` (``ngram`` required): the same per n-gram length, one attribute tree
  per length at ``<output_path>/<n>/`` with attribute ``<attribute_name>_<n>`` (one length too, as Marin).

It runs this project's decontamination stage
(:mod:`marin_assets.processing.classification.decontaminate`, the ``dedupe`` modes of the same names):
an exact set where Marin keeps a Bloom filter (so ``estimated_doc_count`` and ``false_positive_rate`` change
nothing), attribute records ``{"id", "attributes": {<name>: [[start, end, score], ...]}}`` at the input
files' relative paths, and Marin's result ``{"success", "mode", ...}``. A paragraph counts when its
overlapping share reaches ``ngram.overlap_threshold``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.execution.step import THIS_OUTPUT_PATH, StepPath
from marin_assets.execution.storage import join_path
from marin_assets.processing.classification import dedup_config
from marin_assets.processing.classification.dedupe import dedupe


class DeconMode(StrEnum):
    """Marin's workflows (its ``auto()`` values)."""

    DECONTAMINATE = "decontaminate"
    TRAIN_TEST_OVERLAP = "train_test_overlap"


@dataclass
class NGramConfig:
    """Marin's n-gram settings of ``decon`` (``stride`` 0: every n-gram)."""

    ngram_length: int | list[int] = 8
    stride: int = 0
    overlap_threshold: float = 0.7


@dataclass(frozen=True)
class DeconConfig:
    """Marin's config of ``decontaminate`` (same fields and defaults)."""

    input_path: StepPath | list[StepPath]
    output_path: StepPath = THIS_OUTPUT_PATH
    attribute_name: str = "duplicate_text"
    estimated_doc_count: int = 1_000_000
    false_positive_rate: float = 0.001
    ngram: NGramConfig | None = None
    processes: int = 1
    mode: DeconMode = DeconMode.DECONTAMINATE
    decontaminate_source: str | None = None
    text_field: str = "text"


def _dedupe_config(config: DeconConfig) -> dedup_config.DedupeConfig:
    ngram = None
    if config.ngram is not None:
        ngram = dedup_config.NGramConfig(
            ngram_length=config.ngram.ngram_length,
            stride=config.ngram.stride,
            overlap_threshold=config.ngram.overlap_threshold,
        )
    input_path = config.input_path
    if isinstance(input_path, list):
        if len(input_path) != 1:
            raise ValueError("DeconConfig.input_path: give one folder or file here (a list of one is accepted)")
        input_path = input_path[0]
    return dedup_config.DedupeConfig(
        input_path=input_path,
        output_path=config.output_path,
        attribute_name=config.attribute_name,
        estimated_doc_count=config.estimated_doc_count,
        false_positive_rate=config.false_positive_rate,
        ngram=ngram,
        processes=config.processes,
        mode=dedup_config.DedupMode(str(DeconMode(config.mode))),
        decontaminate_source=config.decontaminate_source,
        text_field=config.text_field,
    )


def decontaminate(config: DeconConfig) -> dict[str, Any]:
    """Step function (Marin's name): run the workflow of ``config.mode``.

    Raises:
        ValueError: no ``decontaminate_source``; TRAIN_TEST_OVERLAP without ``ngram``; an unknown mode.
    """
    mode = DeconMode(config.mode)
    if not config.decontaminate_source:
        raise ValueError(f"decontaminate_source is required in {mode.name} mode")
    if mode == DeconMode.TRAIN_TEST_OVERLAP and config.ngram is None:
        raise ValueError("ngram config is required in TRAIN_TEST_OVERLAP mode")
    if mode == DeconMode.DECONTAMINATE:
        return {**dedupe(_dedupe_config(config)), "success": True, "mode": "decontamination"}
    assert config.ngram is not None
    lengths = config.ngram.ngram_length if isinstance(config.ngram.ngram_length, list) else [config.ngram.ngram_length]
    meta: dict[str, Any] = {"success": True, "mode": "train_test_overlap", "ngram_lengths_processed": lengths}
    for n in lengths:
        # Marin's layout whatever the number of lengths: <output_path>/<n>/..., attribute <name>_<n>.
        one = dataclasses.replace(
            config,
            output_path=join_path(step_path(config.output_path), str(n)),
            attribute_name=f"{config.attribute_name}_{n}",
            ngram=dataclasses.replace(config.ngram, ngram_length=n),
        )
        result = dedupe(_dedupe_config(one))
        meta.update({f"ngram_{n}/{k}": v for k, v in result.items() if k != "mode"})
    return meta
