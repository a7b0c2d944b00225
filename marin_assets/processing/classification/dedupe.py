"""Stage 4: exact paragraph dedup + fuzzy (MinHash-LSH) document dedup, incremental over drops.

For drop N the step reads the text docs of N and the *indices* of every earlier drop (drops
ordered by :func:`~marin_assets.landing.zone.drop_sort_key`), never their documents:

* a paragraph (a non-empty line, normalised: lower case, alphanumerics only) is a duplicate when
  its hash is in an earlier drop's paragraph index or occurs earlier in drop N;
* a document is a fuzzy duplicate when it shares an LSH band bucket with a document of an earlier
  drop or an earlier document of drop N, and their estimated Jaccard is ``>= threshold``.

Earlier drops' indices are found next to this drop's output (``<step output>/<drop>/index``),
since every drop of a partitioned step shares the parent folder. An index is usable once its
``_COMPLETE`` marker exists. With ``landing_dir`` set, every valid earlier drop of the landing
zone must have a complete index, else the step fails (so drops processed out of order fail loudly
instead of silently missing duplicates; rerun once the earlier drop is done).

Memory is bounded by ``memory_budget_mb``, not by the drop: the shard tasks spill their hashes to
``index/_shards/``, and the drop-wide passes (``dedup_passes.py``) work one hash range, then one
group of shards, at a time, reading earlier indices by key range (``dedup_index.py``).

Outputs (co-sharded with the text docs)::

    attributes/<shard>.jsonl.gz   {id, attributes: {dedup_paragraph_spans: [[start, end, 1.0]...],
                                   dedup_fuzzy_duplicate: 0|1, dedup_fuzzy_duplicate_of: id|null,
                                   dedup_fuzzy_similarity: float}}
    index/ids.npy, sigs.npy, bands.npy, paragraphs.npy   this drop's index (see dedup_index.py)
    index/_COMPLETE               written last
"""

from __future__ import annotations

import hashlib
import io
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin_assets.core.shard_stage import (
    Counters,
    Quarantine,
    ShardResult,
    ShardStage,
    read_shard,
    shard_stem,
)
from marin_assets.execution.attempt import published_path
from marin_assets.execution.storage import atomic_write_bytes, exists, filesystem, join_path
from marin_assets.landing.zone import drop_sort_key, valid_drops_in
from marin_assets.processing.classification.dedup_index import INDEX_COMPLETE
from marin_assets.processing.classification.minhash import MinHashParams, band_keys, signatures

_NORMALISE = re.compile(r"[^0-9a-z]+")


@dataclass(frozen=True)
class DedupConfig:
    """Config of the dedup stage.

    Attributes:
        input_path: the text stage's output for this drop (reads ``docs/*.jsonl.gz``).
        output_path: this drop's output (``<step output>/<drop>``); siblings are earlier drops.
        drop_id: this drop (partition key).
        landing_dir: when set, every valid earlier drop there must have a complete index.
        ngram, num_perm, bands, seed: MinHash/LSH parameters.
        threshold: minimum estimated Jaccard of a candidate pair (0: any shared bucket counts).
        min_paragraph_chars: shorter normalised paragraphs are never deduplicated (menus,
            "Login", page numbers -- too short to mean anything).
        memory_budget_mb: working memory of the drop-wide passes (not versioned: the outputs do
            not depend on it). A larger drop takes more passes over its spilled hashes, not more
            memory.
    """

    input_path: str
    output_path: str
    drop_id: str
    landing_dir: str | None = None
    ngram: int = 5
    num_perm: int = 112
    bands: int = 14
    seed: int = 42
    threshold: float = 0.7
    min_paragraph_chars: int = 30
    memory_budget_mb: float = 512

    @property
    def params(self) -> MinHashParams:
        return MinHashParams(ngram=self.ngram, num_perm=self.num_perm, bands=self.bands, seed=self.seed)


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the non-empty lines of ``text``."""
    spans = []
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if line.strip():
            spans.append((pos, end))
        pos = end + 1
    return spans


def paragraph_hash(paragraph: str) -> int | None:
    """64-bit hash of the normalised paragraph (None when it is empty after normalising)."""
    norm = _NORMALISE.sub(" ", paragraph.lower()).strip()
    if not norm:
        return None
    return int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "little")


def _normalised_len(paragraph: str) -> int:
    return len(_NORMALISE.sub("", paragraph.lower()))


def hash_shard(path: str, params: MinHashParams, min_paragraph_chars: int) -> dict[str, Any]:
    """Ids, MinHash signatures and paragraph hashes of one shard (a Ray task)."""
    ids: list[str] = []
    texts: list[str] = []
    para_doc: list[int] = []
    para_start: list[int] = []
    para_end: list[int] = []
    para_hash: list[int] = []
    for i, rec in enumerate(read_shard(path)):
        ids.append(rec["id"])
        text = rec["text"]
        texts.append(text)
        for start, end in paragraph_spans(text):
            para = text[start:end]
            if _normalised_len(para) < min_paragraph_chars:
                continue
            h = paragraph_hash(para)
            if h is None:
                continue
            para_doc.append(i)
            para_start.append(start)
            para_end.append(end)
            para_hash.append(h)
    sigs = signatures(texts, params)
    return {
        "ids": ids,
        "sigs": sigs,
        "keys": band_keys(sigs, params),
        "has_words": sigs[:, 0] != np.iinfo(np.uint32).max if len(texts) else np.zeros(0, dtype=bool),
        "para_doc": np.array(para_doc, dtype=np.int64),
        "para_start": np.array(para_start, dtype=np.int64),
        "para_end": np.array(para_end, dtype=np.int64),
        "para_hash": np.array(para_hash, dtype=np.uint64),
    }


def _save_npz(path: str, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def spill_path(output_path: str, shard: str) -> str:
    """Where the hashing pass leaves one shard's arrays (``index/_shards/<stem>.npz``, removed at the end)."""
    return join_path(output_path, f"index/_shards/{shard_stem(shard)}.npz")


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


def run_dedup(config: DedupConfig) -> dict[str, Any]:
    """Step function of the dedup stage; returns materialization metadata."""
    start = time.monotonic()
    done, pending = earlier_drops(config.output_path, config.drop_id)
    if config.landing_dir:
        have = {n for n, _ in done}
        me = drop_sort_key(config.drop_id)
        needed = [d for d in valid_drops_in(config.landing_dir) if drop_sort_key(d) < me]
        missing = sorted(set(needed) - have)
        if missing:
            raise RuntimeError(
                f"dedup of {config.drop_id} needs the indices of earlier drops {missing}, which are not "
                "complete yet; materialize them first (drops are deduplicated in id order)"
            )
    # The base clears attributes/ and index/ (leftovers of a crashed attempt, _COMPLETE included)
    # and hashes the shards in parallel; _DedupStage.summarize runs the drop-wide passes.
    return _DedupStage(config, done, pending, start).run()


class _DedupStage(ShardStage):
    """Per shard: ids, MinHash signatures, paragraph hashes, spilled to ``index/_shards``; then the
    drop-wide passes of :class:`~marin_assets.processing.classification.dedup_passes.DropDedup`."""

    stage = "dedup"
    output_dirs = ("attributes", "index", "quarantine")

    def __init__(self, config: DedupConfig, done: list[tuple[str, str]], pending: list[str], start: float) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config
        self.done = done
        self.pending = pending
        self.start = start

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        with counters.timer("hash"):
            hashed = hash_shard(shard, self.config.params, self.config.min_paragraph_chars)
        ids = hashed.pop("ids")
        with counters.timer("spill"):
            _save_npz(spill_path(self.config.output_path, shard), ids=np.array(ids, dtype=str), **hashed)
        counters.add("documents_in", len(ids))
        # Small: the arrays stay on disk, so the driver never holds the whole drop.
        return {
            "documents": len(ids),
            "paragraphs": len(hashed["para_hash"]),
            "id_chars": max((len(i) for i in ids), default=1),
        }

    def summarize(self, shard_results: list[ShardResult]) -> dict[str, Any]:
        from marin_assets.processing.classification.dedup_passes import DropDedup, ShardInfo

        shards = [ShardInfo(r.shard, spill_path(self.config.output_path, r.shard), **r.extra) for r in shard_results]
        meta = DropDedup(self.config, shards, self.done).run()
        meta["earlier_drops_without_index"] = self.pending
        meta["seconds"] = round(time.monotonic() - self.start, 3)
        return meta
