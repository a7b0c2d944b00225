"""Marin's dedupe config (``DedupMode``, ``NGramConfig``, ``DedupeConfig``) and what both of dedup's
workflows share: the mode a config asks for, and which document files an input or source names.

Its own module so that the deduplication passes (``dedup_passes.py``), decontamination
(``decontaminate.py``) and the step function (``dedupe.py``) all import it from below; none of them
imports another's module to reach the config.

Inputs and sources: a folder contributes its ``**/*.<input_filetype>`` files (Marin's glob; our
stages' ``quarantine/`` and ``index/`` folders and hidden or ``_`` names skipped); a single file is
one input whatever its suffix (``.jsonl.gz``, ``.json.gz``, ``.jsonl.zst``, ``.jsonl`` ...: the reader
goes by the first bytes). A decontamination source folder also contributes the other suffixes
Marin's copy step globbed (``.jsonl.zst``, ``.json.gz``, ``.json.zst``, ``.jsonl``), and
``decontaminate_source`` may be a list of such paths (Marin's ``EVAL_DATASET_STEPS``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.processing.classification.minhash import MinHashParams

FUZZY_DUPLICATE = "fuzzy_duplicate"
# What Marin's copy step globbed below a source folder, besides ``input_filetype``.
SOURCE_SUFFIXES = ("jsonl.gz", "jsonl.zst", "json.gz", "json.zst", "jsonl")


class DedupMode(StrEnum):
    """Marin's workflows of ``dedupe`` (the values are Marin's strings).

    * ``DEDUPLICATE`` -- duplicate paragraphs of the input (Marin: a Bloom filter of every paragraph
      seen so far); here with fuzzy document dedup (MinHash-LSH) beside them, incremental over drops.
    * ``DOC_DEDUPLICATE`` -- duplicate documents: a document whose whole text occurred earlier in
      the input is marked (one span over the whole text) and ``fuzzy_duplicate`` says whether
      MinHash-LSH found an earlier near duplicate.
    * ``DECONTAMINATE`` -- paragraphs of the input found in ``decontaminate_source``.
    * ``TRAIN_TEST_OVERLAP`` -- the same with word n-grams (``ngram`` required): the share of a
      paragraph's n-grams found in the source.
    """

    DECONTAMINATE = "decontaminate"
    DEDUPLICATE = "deduplicate"
    DOC_DEDUPLICATE = "doc_deduplicate"
    TRAIN_TEST_OVERLAP = "train_test_overlap"


@dataclass(frozen=True)
class NGramConfig:
    """Marin's n-gram matching options (decontamination and train/test overlap).

    Attributes:
        ngram_length: words per n-gram (a list: one attribute tree per length).
        stride: use every ``stride``-th n-gram of an input paragraph (0 or None: every one).
        overlap_threshold: share of a paragraph's n-grams found in the source that marks it.
    """

    ngram_length: int | list[int] = 8
    stride: int | None = None
    overlap_threshold: float = 0.7


@dataclass(frozen=True)
class DedupeConfig:
    """Marin's dedupe config (both of its generations' fields), plus ours for the incremental pipeline.

    Attributes:
        input_path: folder of documents (any depth; our text stage's output for a drop), or one file.
        output_path: where the attribute files (mirrored), ``index/`` and ``quarantine/`` go; for a
            drop, ``<step output>/<drop>`` -- siblings are earlier drops.
        attribute_name: key of the duplicate spans in each record's ``attributes``.
        min_length, min_words: shorter paragraphs (characters, words) are never marked.
        bloom_filter_size, estimated_doc_count, false_positive_rate, bloom_filter_path: Marin's
            Bloom filter sizing and file; accepted, no effect (the set here is exact).
        ngram: n-gram matching of decontamination / train-test overlap (None: whole paragraphs).
        processes: Marin's worker count; shards run on the engine's pool here.
        decontaminate: Marin's earlier switch, the same as ``mode=DedupMode.DECONTAMINATE``.
        decontaminate_path: Marin's earlier name of ``decontaminate_source``.
        input_filetype: extension of the files taken from an input folder.
        mode: Marin's workflow switch (:class:`DedupMode`).
        decontaminate_source: the documents to decontaminate against: a folder, a file or a list.
        text_field: the record field holding the text.
        drop_id: this drop (partition key); None: no earlier drops.
        landing_dir: when set, every valid earlier drop there must have a complete index.
        minhash_ngram, num_perm, bands, seed: MinHash/LSH parameters of the fuzzy document dedup.
        threshold: minimum estimated Jaccard of a candidate pair (0: any shared bucket counts).
        min_paragraph_chars: shorter normalised paragraphs are never deduplicated (menus,
            "Login", page numbers -- too short to mean anything).
        memory_budget_mb: working memory of the drop-wide passes (not versioned: the outputs do
            not depend on it). A larger drop takes more passes over its spilled hashes, not more
            memory.
    """

    input_path: StepPath
    output_path: StepPath
    attribute_name: str = "duplicate_text"
    min_length: int = 0
    min_words: int = 0
    bloom_filter_size: int | None = None
    estimated_doc_count: int = 1_000_000
    false_positive_rate: float = 0.001
    ngram: NGramConfig | None = None
    processes: int = 1
    decontaminate: bool = False
    decontaminate_path: StepPath | None = None
    input_filetype: str = "jsonl.gz"
    bloom_filter_path: StepPath | None = None
    mode: DedupMode = DedupMode.DEDUPLICATE
    decontaminate_source: str | list[str] | None = None
    text_field: str = "text"
    drop_id: str | None = None
    landing_dir: StepPath | None = None
    minhash_ngram: int = 5
    num_perm: int = 112
    bands: int = 14
    seed: int = 42
    threshold: float = 0.7
    min_paragraph_chars: int = 30
    memory_budget_mb: float = 512

    @property
    def params(self) -> MinHashParams:
        return MinHashParams(ngram=self.minhash_ngram, num_perm=self.num_perm, bands=self.bands, seed=self.seed)

    @property
    def workflow(self) -> DedupMode:
        """The mode to run: ``mode`` (a string is read as Marin's value), or DECONTAMINATE when
        Marin's earlier ``decontaminate=True`` is set.

        Raises:
            ValueError: a mode that is not one of :class:`DedupMode`'s values.
        """
        if self.decontaminate and DedupMode(self.mode) == DedupMode.DEDUPLICATE:
            return DedupMode.DECONTAMINATE
        return DedupMode(self.mode)

    @property
    def source(self) -> list[str]:
        """The decontamination source paths (``decontaminate_source``, else ``decontaminate_path``)."""
        source = self.decontaminate_source or self.decontaminate_path
        if not source:
            return []
        return [source] if isinstance(source, str) else [str(s) for s in source]


def is_file(path: str) -> bool:
    """Whether ``path`` names one file (not a folder, not missing)."""
    fs, p = filesystem(path)
    try:
        return bool(fs.isfile(p))
    except FileNotFoundError:
        return False


def input_files(path: str, filetype: str) -> list[str]:
    """The document files of a dedupe input: ``[path]`` for a file, else ``**/*.<filetype>`` below it."""
    if is_file(path):
        return [path]
    return find_shards(path, f".{filetype}")


def source_files(config: DedupeConfig) -> list[str]:
    """Every document file of the decontamination source (files, and folders' shards of any
    suffix Marin globbed), in order, each once.

    Raises:
        FileNotFoundError: the source holds no document file.
    """
    found: list[str] = []
    for path in config.source:
        if is_file(path):
            found.append(path)
            continue
        suffixes = dict.fromkeys((config.input_filetype, *SOURCE_SUFFIXES))
        inside = {f for suffix in suffixes for f in find_shards(path, f".{suffix}")}
        found.extend(sorted(inside))
    found = list(dict.fromkeys(found))
    if not found:
        raise FileNotFoundError(f"no document files (*.{config.input_filetype}, or a single file) in {config.source}")
    return found


def attribute_file(config: DedupeConfig, shard: str, output_path: str | None = None) -> str:
    """The attribute file of input ``shard``: its path relative to the input (a single-file
    input: its name), below the output."""
    base = config.input_path.rstrip("/") + "/"
    rel = shard[len(base) :] if shard.startswith(base) else shard.rstrip("/").rsplit("/", 1)[-1]
    return join_path(output_path or config.output_path, rel)


def text_of(record: dict[str, Any], config: DedupeConfig) -> Any:
    """The record's text (``config.text_field``)."""
    return record.get(config.text_field)
