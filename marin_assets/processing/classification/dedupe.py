"""Stage 4, Marin's ``marin.processing.classification.dedupe``: duplicate attributes.

``dedupe(DedupeConfig(input_path, output_path, ...))`` writes, for every ``**/*.<input_filetype>``
file below ``input_path``, an attribute file at the same relative path below ``output_path``
(Marin's layout, which ``consolidate`` reads by that path), one record per document::

    {"id": ..., "attributes": {<attribute_name>: [[start, end, score], ...]}}   # duplicate spans

The workflow is Marin's ``mode`` (:class:`~marin_assets.processing.classification.dedup_config.DedupMode`;
Marin's earlier ``decontaminate=True`` is DECONTAMINATE). The input is a folder (its
``**/*.<input_filetype>`` files) or a single file (any suffix; the attribute file takes its name).

**Deduplication** (``DedupMode.DEDUPLICATE``, the default): exact paragraph dedup plus fuzzy (MinHash-LSH) document dedup. The
records also carry ``fuzzy_duplicate`` (0/1), ``fuzzy_duplicate_of`` (an id) and
``fuzzy_similarity``. With ``drop_id`` set (our curation pipeline) it is incremental over data
drops: for drop N it reads the documents of N and the *indices* of every earlier drop (ordered by
:func:`~marin_assets.landing.zone.drop_sort_key`), never their documents:

* a paragraph (a non-empty line, normalised: lower case, alphanumerics only) is a duplicate when
  its hash is in an earlier drop's paragraph index or occurs earlier in drop N;
* a document is a fuzzy duplicate when it shares an LSH band bucket with a document of an earlier
  drop or an earlier document of drop N, and their estimated Jaccard is ``>= threshold``.

Earlier drops' indices are found next to this drop's output (``<step output>/<drop>/index``),
since every drop of a partitioned step shares the parent folder. An index is usable once its
``_COMPLETE`` marker exists. With ``landing_dir`` set, every valid earlier drop of the landing
zone must have a complete index, else the step fails (so drops processed out of order fail loudly
instead of silently missing duplicates; rerun once the earlier drop is done). Without ``drop_id``
the input is deduplicated on its own.

Memory is bounded by ``memory_budget_mb``, not by the drop: the shard tasks spill their hashes to
``index/_shards/``, and the drop-wide passes (``dedup_passes.py``) work one hash range, then one
group of shards, at a time, reading earlier indices by key range (``dedup_index.py``).
``index/`` (``ids.npy``, ``sigs.npy``, ``bands.npy``, ``paragraphs.npy``, ``_COMPLETE`` last) is
this input's index.

**Document deduplication** (``DedupMode.DOC_DEDUPLICATE``): the same passes, then
``attribute_name`` holds one span over the whole text of a document whose exact text occurred
earlier in the input (Marin's exact document dedup), ``[]`` otherwise.

**Decontamination** (``DECONTAMINATE``, ``TRAIN_TEST_OVERLAP``): :mod:`.decontaminate`.

Config and inputs: :mod:`.dedup_config`; how text is read (paragraphs, hashes): :mod:`.dedup_text`.

``min_length`` / ``min_words``: paragraphs with fewer characters / words are never marked (dolma's
options); ``min_paragraph_chars`` is ours (normalised characters, for the pipeline's dedup).
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from marin_assets.core.io import write_jsonl_shard
from marin_assets.core.shard_stage import Counters, Quarantine, ShardResult, ShardStage, read_shard
from marin_assets.execution.attempt import published_path
from marin_assets.execution.storage import atomic_write_bytes, exists, filesystem, join_path
from marin_assets.landing.zone import drop_sort_key, valid_drops_in
from marin_assets.processing.classification.decontaminate import decontaminate
from marin_assets.processing.classification.dedup_config import (
    FUZZY_DUPLICATE,
    DedupeConfig,
    DedupMode,
    NGramConfig,
    attribute_file,
    input_files,
    text_of,
)
from marin_assets.processing.classification.dedup_index import INDEX_COMPLETE
from marin_assets.processing.classification.dedup_passes import DropDedup, ShardInfo
from marin_assets.processing.classification.dedup_text import hashed_paragraphs
from marin_assets.processing.classification.minhash import MinHashParams, band_keys, signatures

# Marin's names, importable from here as in ``marin.processing.classification.dedupe``.
__all__ = [
    "FUZZY_DUPLICATE",
    "DedupMode",
    "DedupeConfig",
    "NGramConfig",
    "attribute_file",
    "dedupe",
    "hash_shard",
]


def hash_shard(
    path: str,
    params: MinHashParams,
    min_paragraph_chars: int,
    min_length: int = 0,
    min_words: int = 0,
    text_field: str = "text",
) -> dict[str, Any]:
    """Ids, MinHash signatures and paragraph hashes of one shard (a Ray task)."""
    ids: list[str] = []
    texts: list[str] = []
    para_doc: list[int] = []
    paragraphs: list[tuple[int, int, int]] = []
    for i, rec in enumerate(read_shard(path)):
        ids.append(rec["id"])
        text = rec[text_field]
        texts.append(text)
        found = hashed_paragraphs(text, min_paragraph_chars, min_length, min_words)
        para_doc.extend([i] * len(found))
        paragraphs.extend(found)
    sigs = signatures(texts, params)
    table = np.array(paragraphs, dtype=np.uint64).reshape(-1, 3)
    return {
        "ids": ids,
        "sigs": sigs,
        "keys": band_keys(sigs, params),
        "has_words": sigs[:, 0] != np.iinfo(np.uint32).max if len(texts) else np.zeros(0, dtype=bool),
        "para_doc": np.array(para_doc, dtype=np.int64),
        "para_start": table[:, 0].astype(np.int64),
        "para_end": table[:, 1].astype(np.int64),
        "para_hash": table[:, 2].copy(),
    }


def _save_npz(path: str, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def spill_path(output_path: str, shard: str) -> str:
    """Where the hashing pass leaves one shard's arrays (``index/_shards/<stem>.npz``, removed at the end).

    ``shard`` is the shard's path relative to the input (folders become ``__``, so equally named
    shards of different folders do not collide).
    """
    rel = shard[: -len(".jsonl.gz")] if shard.endswith(".jsonl.gz") else shard.split(".", 1)[0]
    return join_path(output_path, f"index/_shards/{rel.replace('/', '__')}.npz")


def earlier_drops(output_path: str, drop_id: str) -> tuple[list[tuple[str, str]], list[str]]:
    """((drop, path) of earlier drops with a complete index, earlier drops without one)."""
    # The step writes into its attempt's staging folder; earlier drops sit beside the published output.
    parent = published_path(output_path).rstrip("/").rsplit("/", 1)[0]
    fs, p = filesystem(parent)
    try:
        entries = fs.ls(p, detail=True)
    except FileNotFoundError:
        entries = []
    done, pending = [], []
    me = drop_sort_key(drop_id)
    for entry in entries:
        if entry.get("type") != "directory":
            continue
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.startswith((".", "_")) or drop_sort_key(name) >= me:
            continue
        path = join_path(parent, name)
        (done if exists(join_path(path, INDEX_COMPLETE)) else pending).append((name, path))
    done.sort(key=lambda x: drop_sort_key(x[0]))
    return done, sorted(n for n, _ in pending)


def dedupe(config: DedupeConfig) -> dict[str, Any]:
    """Step function (Marin's name): run the config's :class:`DedupMode`; returns materialization metadata.

    Raises:
        ValueError: an unknown ``mode``; DECONTAMINATE / TRAIN_TEST_OVERLAP without a source;
            TRAIN_TEST_OVERLAP without ``ngram``; ``ngram`` in a deduplication mode (n-gram
            matching is a decontamination option here).
        RuntimeError: ``landing_dir`` names earlier drops whose index is not complete yet.
    """
    start = time.monotonic()
    mode = config.workflow
    if mode in (DedupMode.DECONTAMINATE, DedupMode.TRAIN_TEST_OVERLAP):
        return decontaminate(config)
    if config.ngram is not None:
        raise ValueError(
            "DedupeConfig.ngram applies to decontamination here (mode=DedupMode.DECONTAMINATE or "
            "TRAIN_TEST_OVERLAP); deduplication matches whole paragraphs and MinHash document signatures "
            "(minhash_ngram)"
        )
    if config.drop_id is None:
        done, pending = [], []
    else:
        done, pending = earlier_drops(config.output_path, config.drop_id)
    if config.landing_dir and config.drop_id is not None:
        have = {n for n, _ in done}
        me = drop_sort_key(config.drop_id)
        needed = [d for d in valid_drops_in(config.landing_dir) if drop_sort_key(d) < me]
        missing = sorted(set(needed) - have)
        if missing:
            raise RuntimeError(
                f"dedup of {config.drop_id} needs the indices of earlier drops {missing}, which are not "
                "complete yet; materialize them first (drops are deduplicated in id order)"
            )
    # The base clears the attribute trees and index/ (leftovers of a crashed attempt, _COMPLETE
    # included) and hashes the shards in parallel; _DedupStage.summarize runs the drop-wide passes.
    meta = _DedupStage(config, done, pending, start).run()
    if mode in (DedupMode.DOC_DEDUPLICATE, DedupMode.EXACT_DOC_DEDUPLICATE):
        meta.update(_mark_documents(config))
    meta["mode"] = str(mode)
    return meta


def dedupe_with_config_resources(config: DedupeConfig) -> Callable[[DedupeConfig], dict[str, Any]]:
    """Marin's: a ``dedupe`` remote function carrying ``config``'s Ray resources. Here the engine and the
    shard pool place the work, so it is :func:`dedupe` itself."""
    return dedupe


class _DedupStage(ShardStage):
    """Per shard: ids, MinHash signatures, paragraph hashes, spilled to ``index/_shards``; then the
    drop-wide passes of :class:`~marin_assets.processing.classification.dedup_passes.DropDedup`."""

    stage = "dedup"
    mirror = True
    output_dirs = ("index", "quarantine")

    def __init__(self, config: DedupeConfig, done: list[tuple[str, str]], pending: list[str], start: float) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config
        self.done = done
        self.pending = pending
        self.start = start

    def shards(self) -> list[str]:
        return input_files(self.input_path, self.config.input_filetype)

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        with counters.timer("hash"):
            hashed = hash_shard(
                shard,
                self.config.params,
                self.config.min_paragraph_chars,
                self.config.min_length,
                self.config.min_words,
                self.config.text_field,
            )
        ids = hashed.pop("ids")
        with counters.timer("spill"):
            _save_npz(
                spill_path(self.config.output_path, self.relative_path(shard)), ids=np.array(ids, dtype=str), **hashed
            )
        counters.add("documents_in", len(ids))
        # Small: the arrays stay on disk, so the driver never holds the whole drop.
        return {
            "documents": len(ids),
            "paragraphs": len(hashed["para_hash"]),
            "id_chars": max((len(i) for i in ids), default=1),
        }

    def summarize(self, shard_results: list[ShardResult]) -> dict[str, Any]:
        shards = [
            ShardInfo(r.shard, spill_path(self.config.output_path, self.relative_path(r.shard)), **r.extra)
            for r in shard_results
        ]
        meta = DropDedup(self.config, shards, self.done).run()
        # What this drop was deduplicated against: the earlier drops with a complete index. A failed
        # earlier drop has none (listed below); see docs/curation.md, "A failed drop".
        meta["deduplicated_against"] = [name for name, _ in self.done][-50:]
        meta["deduplicated_against_count"] = len(self.done)
        meta["earlier_drops_without_index"] = self.pending
        meta["seconds"] = round(time.monotonic() - self.start, 3)
        return meta


def _mark_documents(config: DedupeConfig) -> dict[str, Any]:
    """DOC_DEDUPLICATE: each attribute file's ``attribute_name`` becomes ``[[0, len(text), 1.0]]``
    for a document whose whole text occurred earlier in the input (files in order, then lines),
    else ``[]``; ``fuzzy_duplicate`` and its companions stay as the fuzzy pass decided."""
    seen: set[bytes] = set()
    duplicates = 0
    for shard in input_files(config.input_path, config.input_filetype):
        path = attribute_file(config, shard)
        attributes = {r["id"]: r for r in read_shard(path)}
        out = []
        for rec in read_shard(shard):
            text = text_of(rec, config)
            digest = hashlib.blake2b(str(text).encode("utf-8", "surrogatepass"), digest_size=16).digest()
            row = attributes[rec["id"]]
            spans = [[0, len(text), 1.0]] if digest in seen and isinstance(text, str) else []
            seen.add(digest)
            duplicates += bool(spans)
            out.append({"id": row["id"], "attributes": {**row["attributes"], config.attribute_name: spans}})
        write_jsonl_shard(path, out)
    return {"document_duplicates": duplicates}
