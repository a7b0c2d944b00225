"""Decontamination and train/test overlap (``DedupMode.DECONTAMINATE`` / ``TRAIN_TEST_OVERLAP``).

Every paragraph of the source's documents (``decontaminate_source``: a folder, a file or a list) is
indexed; a paragraph of the input is marked when it occurs there (``ngram=None``: the whole
normalised paragraph; span score 1.0) or when at least ``ngram.overlap_threshold`` of its word
n-grams (``ngram.ngram_length`` words, every ``stride``-th n-gram; a shorter paragraph is one
n-gram) occur there (span score: the overlapping share). A list of n-gram lengths writes one
attribute tree per length, ``<output_path>/<n>/...`` with attribute ``<attribute_name>_<n>``.
Marin runs a Bloom filter; here the set is exact (no false positives), so ``bloom_filter_size``,
``estimated_doc_count``, ``false_positive_rate`` and ``bloom_filter_path`` are accepted and change
nothing; the source's n-grams are held in memory.

Output: for every input file, an attribute file at the same relative path below the output (a
single-file input: its name), one record per document
``{"id": ..., "attributes": {<attribute>: [[start, end, score], ...]}}``.
"""

from __future__ import annotations

import time
from typing import Any

from marin_assets.core.io import write_jsonl_shard
from marin_assets.core.shard_stage import Counters, Quarantine, ShardStage, read_shard
from marin_assets.execution.storage import join_path
from marin_assets.processing.classification.dedup_config import (
    DedupeConfig,
    DedupMode,
    input_files,
    source_files,
    text_of,
)
from marin_assets.processing.classification.dedup_text import (
    ngram_hashes,
    paragraph_hash,
    paragraph_spans,
    too_short,
    words,
)


def source_keys(config: DedupeConfig, n: int | None) -> set[int]:
    """Every paragraph hash (``n`` None) or every word n-gram hash of the source documents."""
    keys: set[int] = set()
    for path in source_files(config):
        for rec in read_shard(path):
            text = text_of(rec, config)
            if not isinstance(text, str):
                continue
            for start, end in paragraph_spans(text):
                para = text[start:end]
                if n is None:
                    h = paragraph_hash(para)
                    if h is not None:
                        keys.add(h)
                else:
                    keys.update(ngram_hashes(words(para), n, 1))
    return keys


class DecontaminateStage(ShardStage):
    """Per shard: spans of the paragraphs found in the source, mirrored attribute files."""

    stage = "decontaminate"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, config: DedupeConfig, n: int | None, keys: set[int], output_path: str, attribute: str) -> None:
        super().__init__(config.input_path, output_path)
        self.config = config
        self.n = n
        self.keys = keys
        self.attribute = attribute

    def shards(self) -> list[str]:
        return input_files(self.input_path, self.config.input_filetype)

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        ngram = self.config.ngram
        stride = max(1, ngram.stride or 1) if ngram else 1
        out = []
        for i, rec in enumerate(read_shard(shard)):
            text = text_of(rec, self.config)
            if not isinstance(text, str):
                quarantine.add("no_text", f"text is {type(text).__name__}", line=i + 1, doc_id=rec.get("id"))
                continue
            spans: list[list[float]] = []
            for start, end in paragraph_spans(text):
                para = text[start:end]
                if too_short(para, self.config.min_length, self.config.min_words):
                    continue
                if self.n is None or ngram is None:
                    h = paragraph_hash(para)
                    if h is not None and h in self.keys:
                        spans.append([start, end, 1.0])
                    continue
                grams = ngram_hashes(words(para), self.n, stride)
                if not grams:
                    continue
                share = sum(g in self.keys for g in grams) / len(grams)
                if share >= ngram.overlap_threshold:
                    spans.append([start, end, round(share, 4)])
            counters.add("documents_in")
            counters.add("paragraphs_marked", len(spans))
            counters.add("documents_with_overlap", 1 if spans else 0)
            out.append({"id": rec.get("id"), "attributes": {self.attribute: spans}})
        # Named (and compressed) as its input file, below the output (Marin's mirrored layout).
        write_jsonl_shard(join_path(self.output_path, self.relative_path(shard)), out)
        return None


def decontaminate(config: DedupeConfig) -> dict[str, Any]:
    """Mark the input's paragraphs found in the source (see the module docstring); returns metadata.

    Raises:
        ValueError: no source; TRAIN_TEST_OVERLAP without ``ngram`` (Marin's messages).
        FileNotFoundError: the source holds no document file.
    """
    start = time.monotonic()
    mode = config.workflow
    if not config.source:
        raise ValueError(
            f"decontaminate_source is required in {mode.name} mode (with Marin's earlier decontaminate=True: "
            "it needs decontaminate_path)"
        )
    if mode == DedupMode.TRAIN_TEST_OVERLAP and not config.ngram:
        raise ValueError("ngram config is required in TRAIN_TEST_OVERLAP mode")
    lengths: list[int | None]
    if config.ngram is None:
        lengths = [None]
    elif isinstance(config.ngram.ngram_length, int):
        lengths = [config.ngram.ngram_length]
    else:
        lengths = list(config.ngram.ngram_length)
    several = len(lengths) > 1
    meta: dict[str, Any] = {"mode": str(mode)}
    for n in lengths:
        keys = source_keys(config, n)
        output = join_path(config.output_path, str(n)) if several else config.output_path
        attribute = f"{config.attribute_name}_{n}" if several else config.attribute_name
        result = DecontaminateStage(config, n, keys, output, attribute).run()
        prefix = f"ngram_{n}/" if several else ""
        meta.update({f"{prefix}{k}": v for k, v in result.items()})
        meta[f"{prefix}source_keys"] = len(keys)
    meta["seconds"] = round(time.monotonic() - start, 3)
    return meta
