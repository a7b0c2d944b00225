"""Stage 4: exact paragraph dedup + fuzzy (MinHash-LSH) document dedup, incremental over drops.

For drop N the step reads the text docs of N and the *indices* of every earlier drop (drops
ordered by :func:`~marin_assets.curation.landing.drop_sort_key`), never their documents:

* a paragraph (a non-empty line, normalised: lower case, alphanumerics only) is a duplicate when
  its hash is in an earlier drop's paragraph index or occurs earlier in drop N;
* a document is a fuzzy duplicate when it shares an LSH band bucket with a document of an earlier
  drop or an earlier document of drop N, and their estimated Jaccard is ``>= threshold``.

Earlier drops' indices are found next to this drop's output (``<step output>/<drop>/index``),
since every drop of a partitioned step shares the parent folder. An index is usable once its
``_COMPLETE`` marker exists. With ``landing_dir`` set, every valid earlier drop of the landing
zone must have a complete index, else the step fails (so drops processed out of order fail loudly
instead of silently missing duplicates; rerun once the earlier drop is done).

Outputs (co-sharded with the text docs)::

    attributes/<shard>.jsonl.gz   {id, attributes: {dedup_paragraph_spans: [[start, end, 1.0]...],
                                   dedup_fuzzy_duplicate: 0|1, dedup_fuzzy_duplicate_of: id|null,
                                   dedup_fuzzy_similarity: float}}
    index/minhash.npz             ids, signatures, band keys of this drop
    index/paragraphs.npy          sorted unique paragraph hashes of this drop
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

from marin_assets.curation.io import write_json
from marin_assets.curation.landing import drop_sort_key, valid_drops_in
from marin_assets.curation.minhash import MinHashParams, band_keys, find_duplicates, signatures
from marin_assets.curation.shard_stage import Counters, Quarantine, ShardResult, ShardStage, read_shard, write_shard
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import atomic_write_bytes, exists, filesystem, join_path, read_bytes

INDEX_COMPLETE = "index/_COMPLETE"
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


def _save_npy(path: str, array: np.ndarray) -> None:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def _save_npz(path: str, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def _load_index(drop_path: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(read_bytes(join_path(drop_path, "index/minhash.npz"))), allow_pickle=False) as z:
        mh = {k: z[k] for k in z.files}
    paras = np.load(io.BytesIO(read_bytes(join_path(drop_path, "index/paragraphs.npy"))), allow_pickle=False)
    return {**mh, "paragraphs": paras}


def earlier_drops(output_path: str, drop_id: str) -> tuple[list[tuple[str, str]], list[str]]:
    """((drop, path) of earlier drops with a complete index, earlier drops without one)."""
    parent = output_path.rstrip("/").rsplit("/", 1)[0]
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
    # and hashes the shards in parallel; _DedupStage.summarize deduplicates and writes the index.
    return _DedupStage(config, done, pending, start).run()


class _DedupStage(ShardStage):
    """Per shard: ids, MinHash signatures, paragraph hashes; then one pass over the drop."""

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
        counters.add("documents_in", len(hashed["ids"]))
        return hashed

    def summarize(self, shard_results: list[ShardResult]) -> dict[str, Any]:
        return _deduplicate(
            self.config,
            [r.shard for r in shard_results],
            [r.extra for r in shard_results],
            self.done,
            self.pending,
            self.start,
        )


def _gather(
    results: list[dict[str, Any]], key: str, row_shape: tuple[int, ...], dtype: Any, offsets: Any = None
) -> np.ndarray:
    """``concatenate([r[key] ...])`` into one preallocated array, dropping each shard's part as soon
    as it is copied: the peak holds one copy of the drop's arrays, not two (``+ offsets[i]`` per part)."""
    out = np.empty((sum(len(r[key]) for r in results), *row_shape), dtype=dtype)
    pos = 0
    for i, r in enumerate(results):
        part = r.pop(key)
        out[pos : pos + len(part)] = part if offsets is None else part + offsets[i]
        pos += len(part)
    return out


def _deduplicate(
    config: DedupConfig,
    shards: list[str],
    results: list[dict[str, Any]],
    done: list[tuple[str, str]],
    pending: list[str],
    start: float,
) -> dict[str, Any]:
    """Mark duplicates of this drop against earlier drops' indices; write attributes + index."""
    params = config.params
    ids = [i for r in results for i in r["ids"]]
    n = len(ids)
    doc_offsets = np.cumsum([0] + [len(r["ids"]) for r in results])
    sigs = _gather(results, "sigs", (params.num_perm,), np.uint32)
    keys = _gather(results, "keys", (params.bands,), np.uint64)
    has_words = _gather(results, "has_words", (), bool)
    para_doc = _gather(results, "para_doc", (), np.int64, offsets=doc_offsets)
    para_start = _gather(results, "para_start", (), np.int64)
    para_end = _gather(results, "para_end", (), np.int64)
    para_hash = _gather(results, "para_hash", (), np.uint64)

    # Earlier drops' indices, in drop order (timed: the part of a drop's cost that grows with N).
    index_start = time.monotonic()
    old = [_load_index(path) for _, path in done]
    old_ids = np.concatenate([o["ids"] for o in old]) if old else np.zeros(0, dtype=str)
    old_sigs = np.concatenate([o["sigs"] for o in old]) if old else np.zeros((0, params.num_perm), np.uint32)
    old_keys = np.concatenate([o["keys"] for o in old]) if old else np.zeros((0, params.bands), np.uint64)
    old_valid = np.concatenate([o["has_words"] for o in old]) if old else np.zeros(0, bool)
    old_paras = np.unique(np.concatenate([o["paragraphs"] for o in old])) if old else np.zeros(0, np.uint64)
    index_seconds = time.monotonic() - index_start

    # Exact paragraphs: duplicate if seen in an earlier drop or earlier in this one.
    para_dup = np.zeros(len(para_hash), dtype=bool)
    if len(para_hash):
        if len(old_paras):
            para_dup |= np.isin(para_hash, old_paras)
        _, first, inverse = np.unique(para_hash, return_index=True, return_inverse=True)
        para_dup |= first[inverse] != np.arange(len(para_hash))

    # Fuzzy documents.
    dup_of, sim = find_duplicates(keys, sigs, old_keys, old_sigs, config.threshold, has_words, old_valid)

    spans_by_doc: dict[int, list[list[float]]] = {}
    for d, s, e in zip(para_doc[para_dup], para_start[para_dup], para_end[para_dup], strict=True):
        spans_by_doc.setdefault(int(d), []).append([int(s), int(e), 1.0])

    def dup_id(i: int) -> str | None:
        j = int(dup_of[i])
        if j == -1:
            return None
        return ids[j] if j >= 0 else str(old_ids[-2 - j])

    samples = []
    for r_index, shard in enumerate(shards):
        out = []
        for local, doc_id in enumerate(results[r_index]["ids"]):
            i = int(doc_offsets[r_index]) + local
            of = dup_id(i)
            out.append(
                {
                    "id": doc_id,
                    "attributes": {
                        "dedup_paragraph_spans": spans_by_doc.get(i, []),
                        "dedup_fuzzy_duplicate": 1 if of is not None else 0,
                        "dedup_fuzzy_duplicate_of": of,
                        "dedup_fuzzy_similarity": round(float(sim[i]), 4),
                    },
                }
            )
            if of is not None and len(samples) < 5:
                samples.append({"id": doc_id, "duplicate_of": of, "similarity": round(float(sim[i]), 3)})
        write_shard(join_path(config.output_path, f"attributes/{shard.rsplit('/', 1)[-1]}"), out)

    _save_npz(
        join_path(config.output_path, "index/minhash.npz"),
        ids=np.array(ids, dtype=str),
        sigs=sigs,
        keys=keys,
        has_words=has_words,
    )
    _save_npy(join_path(config.output_path, "index/paragraphs.npy"), np.unique(para_hash))
    write_json(
        join_path(config.output_path, INDEX_COMPLETE),
        {"drop_id": config.drop_id, "documents": n, "earlier_drops": [name for name, _ in done]},
    )
    fuzzy_within = int((dup_of >= 0).sum())
    fuzzy_cross = int((dup_of <= -2).sum())
    return {
        "documents_in": n,
        "paragraphs": int(len(para_hash)),
        "paragraph_duplicates": int(para_dup.sum()),
        "documents_with_duplicate_paragraphs": len(spans_by_doc),
        "fuzzy_duplicates": fuzzy_within + fuzzy_cross,
        "fuzzy_duplicates_within_drop": fuzzy_within,
        "fuzzy_duplicates_of_earlier_drops": fuzzy_cross,
        "earlier_drops_indexed": [name for name, _ in done],
        "earlier_drops_without_index": pending,
        "earlier_index_seconds": round(index_seconds, 3),
        "earlier_index_documents": int(len(old_ids)),
        "seconds": round(time.monotonic() - start, 3),
        "samples": table_markdown(samples),
    }
