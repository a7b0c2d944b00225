"""The drop-wide passes of the dedup stage, in memory bounded by ``DedupeConfig.memory_budget_mb``.

The shard tasks have left each shard's ids, signatures, band keys and paragraph hashes in
``index/_shards/<stem>.npz``. Nothing below holds the whole drop:

1. **doc tables** -- ``ids.npy`` and ``sigs.npy`` of this drop's index, streamed shard by shard.
2. **hash ranges** -- the 64-bit hash space is cut into R ranges (R from the drop's size, the
   largest earlier drop and the budget). Per range, the band keys and paragraph hashes that fall in
   it are gathered from every shard and sorted: each bucket's earliest document (this drop's index
   rows, and the leader a later document is compared with), the earliest document of the earliest
   earlier drop holding that key (a key-range slice of each earlier ``bands.npy``), the first
   occurrence of each paragraph and the paragraphs an earlier drop already has. Candidate pairs
   ``(doc, band, candidate, earlier?)`` and duplicate paragraphs are appended to spill files per
   group of shards.
3. **shard groups** -- per group of consecutive shards (its documents fit the budget): the
   candidates' similarities (signature rows read from memory maps), the decision, the attribute
   files of the group's shards.

The decision equals the in-memory algorithm's: a document is a duplicate of an earlier drop's
document when, for the first band in band order, that band's earliest earlier-drop document with
its key is similar enough; else of the earliest document of this drop sharing a bucket with it, in
the first band where that one is similar enough. Both only depend on the bucket's earliest
documents, which is why per-range sorting gives the same answer as one global sort.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from marin_assets.core.io import write_json, write_jsonl_shard
from marin_assets.core.shard_stage import clear_dir
from marin_assets.execution.fence import check_fence
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import filesystem, is_local, join_path
from marin_assets.processing.classification.dedup_config import FUZZY_DUPLICATE, DedupeConfig, attribute_file
from marin_assets.processing.classification.dedup_index import (
    BAND_DTYPE,
    INDEX_COMPLETE,
    INDEX_FILES,
    INDEX_FORMAT,
    DropIndex,
    NpyWriter,
    RawRows,
    concat_raw_to_npy,
    open_drop_index,
    publish_files,
)
from marin_assets.processing.classification.minhash import estimated_jaccard

CANDIDATE_DTYPE = np.dtype([("doc", "<i8"), ("cand", "<i8"), ("band", "<i2"), ("earlier", "u1")])
# Bytes per row of a hash-range pass, sort temporaries and candidate rows included (measured with
# tracemalloc on generated drops, then rounded up), and per document of a shard group.
BUCKET_ROW_BYTES = 160
PARAGRAPH_ROW_BYTES = 80
GROUP_DOC_OVERHEAD_BYTES = 64
_HASH_SPACE = 1 << 64


@dataclass
class ShardInfo:
    """One text shard as the hashing pass left it."""

    shard: str
    spill: str
    documents: int
    paragraphs: int
    id_chars: int


@dataclass
class _Group:
    shards: range
    docs: tuple[int, int]
    paragraphs: tuple[int, int]
    candidates: RawRows
    duplicate_paragraphs: RawRows


class DropDedup:
    """The passes over one drop's spilled hashes (see the module docstring)."""

    def __init__(self, config: DedupeConfig, shards: list[ShardInfo], done: list[tuple[str, str]]) -> None:
        self.config = config
        self.params = config.params
        self.shards = shards
        self.done = done
        self.budget = max(1 << 16, int(config.memory_budget_mb * (1 << 20)))
        # Candidate pairs are compared in chunks: two signature rows each and the comparison, plus up
        # to two 4 KiB pages of the memory-mapped signatures they touch (resident until unmapped).
        self.similarity_chunk = int(np.clip(self.budget // (12 * self.params.num_perm + 8192), 256, 65536))
        self.doc_offsets = np.cumsum([0] + [s.documents for s in shards])
        self.para_offsets = np.cumsum([0] + [s.paragraphs for s in shards])
        self.documents = int(self.doc_offsets[-1])
        self.index_seconds = 0.0
        self.earlier: list[DropIndex] = []
        self.earlier_offsets = np.zeros(1, dtype=np.int64)

    # -- layout
    def run(self) -> dict[str, Any]:
        """All passes; returns the stage's metadata."""
        index = join_path(self.config.output_path, "index")
        local_index = is_local(index)
        # Local output: the index is built in place (the marker, written last, makes it usable).
        self.folder = filesystem(index)[1] if local_index else tempfile.mkdtemp(prefix="marin-dedup-")
        self.work = os.path.join(self.folder, "_work")
        os.makedirs(self.work, exist_ok=True)
        try:
            check_fence()
            with self._timed():
                for i, (name, path) in enumerate(self.done):
                    self.earlier.append(open_drop_index(name, path, os.path.join(self.work, f"earlier-{i}")))
            self.earlier_offsets = np.cumsum([0] + [e.documents for e in self.earlier]).astype(np.int64)
            self._localize_spills()
            self._write_doc_tables()
            ranges = self._plan_ranges()
            self._plan_groups()
            self.band_parts = [
                RawRows(os.path.join(self.work, f"band-{b}.raw"), BAND_DTYPE) for b in range(self.params.bands)
            ]
            self.paragraph_part = RawRows(os.path.join(self.work, "paragraphs.raw"), np.uint64)
            for lo, hi in ranges:
                self._hash_range(lo, hi)
            meta = self._decide_and_write()
            band_offsets = concat_raw_to_npy(os.path.join(self.folder, "bands.npy"), self.band_parts)
            concat_raw_to_npy(os.path.join(self.folder, "paragraphs.npy"), [self.paragraph_part])
            if not local_index:
                publish_files(self.folder, index, INDEX_FILES)
            shutil.rmtree(self.work, ignore_errors=True)
            clear_dir(join_path(index, "_shards"))
            write_json(
                join_path(self.config.output_path, INDEX_COMPLETE),
                {
                    "drop_id": self.config.drop_id,
                    "documents": self.documents,
                    "earlier_drops": [name for name, _ in self.done],
                    "format": INDEX_FORMAT,
                    "band_offsets": band_offsets,
                    "paragraphs": self.paragraph_part.rows,
                },
            )
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
            if not local_index:
                shutil.rmtree(self.folder, ignore_errors=True)
        meta.update(
            {
                "earlier_drops_indexed": [name for name, _ in self.done],
                "earlier_index_seconds": round(self.index_seconds, 3),
                "earlier_index_documents": int(self.earlier_offsets[-1]),
                "memory_budget_mb": self.config.memory_budget_mb,
                "hash_ranges": len(ranges),
                "shard_groups": len(self.groups),
            }
        )
        return meta

    def _timed(self) -> _Timer:
        return _Timer(self)

    def _localize_spills(self) -> None:
        """Shard spills on an object store are copied to the local work folder once (every hash
        range reads them again)."""
        for i, info in enumerate(self.shards):
            if not is_local(info.spill):
                fs, remote = filesystem(info.spill)
                local = os.path.join(self.work, f"shard-{i}.npz")
                fs.get_file(remote, local)
                info.spill = local

    def _spill(self, shard: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        with np.load(filesystem(self.shards[shard].spill)[1], allow_pickle=False) as z:
            return {name: z[name] for name in names}

    def _write_doc_tables(self) -> None:
        width = max([1] + [s.id_chars for s in self.shards])
        ids = NpyWriter(os.path.join(self.folder, "ids.npy"), f"<U{width}", (self.documents,))
        sigs = NpyWriter(os.path.join(self.folder, "sigs.npy"), np.uint32, (self.documents, self.params.num_perm))
        for s in range(len(self.shards)):
            arrays = self._spill(s, ("ids", "sigs"))
            ids.append(arrays["ids"])
            sigs.append(arrays["sigs"])
        ids.close()
        sigs.close()

    def _plan_ranges(self) -> list[tuple[int, int | None]]:
        bands = self.params.bands
        rows = self.documents * bands * BUCKET_ROW_BYTES + int(self.para_offsets[-1]) * PARAGRAPH_ROW_BYTES
        # One earlier drop's slice is held at a time: its paragraphs, one band of its buckets.
        earlier = max([0] + [e.paragraphs * 8 + e.band_rows // max(1, bands) * 16 for e in self.earlier])
        count = max(1, math.ceil((rows + earlier) / self.budget))
        bounds = [r * _HASH_SPACE // count for r in range(count)]
        return [(lo, bounds[r + 1] if r + 1 < count else None) for r, lo in enumerate(bounds)]

    def _plan_groups(self) -> None:
        per_doc = 4 * self.params.num_perm + 2 * self.params.bands * CANDIDATE_DTYPE.itemsize + GROUP_DOC_OVERHEAD_BYTES
        docs_per_group = max(1, self.budget // per_doc)
        self.groups: list[_Group] = []
        start = 0
        while start < len(self.shards) or not self.groups:
            stop = start + 1
            while stop < len(self.shards) and self.doc_offsets[stop + 1] - self.doc_offsets[start] <= docs_per_group:
                stop += 1
            stop = min(stop, len(self.shards))
            g = len(self.groups)
            self.groups.append(
                _Group(
                    range(start, stop),
                    (int(self.doc_offsets[start]), int(self.doc_offsets[stop])),
                    (int(self.para_offsets[start]), int(self.para_offsets[stop])),
                    RawRows(os.path.join(self.work, f"candidates-{g}.raw"), CANDIDATE_DTYPE),
                    RawRows(os.path.join(self.work, f"duplicate-paragraphs-{g}.raw"), np.int64),
                )
            )
            start = stop
        self.group_doc_starts = np.array([g.docs[0] for g in self.groups[1:]], dtype=np.int64)
        self.group_para_starts = np.array([g.paragraphs[0] for g in self.groups[1:]], dtype=np.int64)

    def _by_group(self, rows: np.ndarray, position: np.ndarray, starts: np.ndarray, attr: str) -> None:
        """Append ``rows`` to the spill file of the group holding each row's ``position``."""
        if not len(rows):
            return
        group = np.searchsorted(starts, position, side="right")
        for g in np.unique(group):
            getattr(self.groups[int(g)], attr).append(rows[group == g])

    # -- pass 2: one hash range
    def _hash_range(self, lo: int, hi: int | None) -> None:
        keys, bands, docs, hashes, positions = [], [], [], [], []
        for s in range(len(self.shards)):
            arrays = self._spill(s, ("keys", "has_words", "para_hash"))
            k = arrays["keys"]
            inside = (k >= np.uint64(lo)) & arrays["has_words"][:, None]
            if hi is not None:
                inside &= k < np.uint64(hi)
            d, b = np.nonzero(inside)
            keys.append(k[d, b])
            bands.append(b.astype(np.int16))
            docs.append(d + self.doc_offsets[s])
            h = arrays["para_hash"]
            at = np.flatnonzero((h >= np.uint64(lo)) & (h < np.uint64(hi)) if hi is not None else h >= np.uint64(lo))
            hashes.append(h[at])
            positions.append(at + self.para_offsets[s])
        self._buckets(_cat(keys, np.uint64), _cat(bands, np.int16), _cat(docs, np.int64), lo, hi)
        self._paragraphs(_cat(hashes, np.uint64), _cat(positions, np.int64), lo, hi)

    def _buckets(self, keys: np.ndarray, bands: np.ndarray, docs: np.ndarray, lo: int, hi: int | None) -> None:
        order = np.lexsort((docs, keys, bands))  # band, key, then document order
        keys, bands, docs = keys[order], bands[order], docs[order]
        del order
        first = np.ones(len(keys), dtype=bool)
        first[1:] = (bands[1:] != bands[:-1]) | (keys[1:] != keys[:-1])
        bucket = np.cumsum(first) - 1
        heads = np.flatnonzero(first)
        leader, head_keys, head_bands = docs[heads], keys[heads], bands[heads]
        del heads, keys
        band_bounds = np.searchsorted(head_bands, np.arange(self.params.bands + 1))
        for b in range(self.params.bands):
            part = slice(band_bounds[b], band_bounds[b + 1])
            table = np.empty(part.stop - part.start, dtype=BAND_DTYPE)
            table["key"], table["doc"] = head_keys[part], leader[part]
            self.band_parts[b].append(table)
        # Earlier drops: the earliest document of the earliest drop holding each bucket's key.
        earliest = np.full(len(leader), -1, dtype=np.int64)
        with self._timed():
            for e, old in enumerate(self.earlier):
                for b in range(self.params.bands):
                    part = slice(band_bounds[b], band_bounds[b + 1])
                    if part.start == part.stop:
                        continue
                    old_keys, old_docs = old.band_slice(b, lo, hi)
                    if not len(old_keys):
                        continue
                    want = head_keys[part]
                    pos = np.minimum(np.searchsorted(old_keys, want), len(old_keys) - 1)
                    view = earliest[part]
                    hit = (old_keys[pos] == want) & (view == -1)
                    view[hit] = self.earlier_offsets[e] + old_docs[pos[hit]]
        within = np.flatnonzero(~first)
        rows = np.empty(len(within), dtype=CANDIDATE_DTYPE)
        rows["doc"], rows["cand"], rows["band"], rows["earlier"] = (
            docs[within],
            leader[bucket[within]],
            bands[within],
            0,
        )
        self._by_group(rows, rows["doc"], self.group_doc_starts, "candidates")
        del rows, within
        cross = np.flatnonzero(earliest[bucket] >= 0)
        rows = np.empty(len(cross), dtype=CANDIDATE_DTYPE)
        rows["doc"], rows["cand"], rows["band"], rows["earlier"] = docs[cross], earliest[bucket[cross]], bands[cross], 1
        self._by_group(rows, rows["doc"], self.group_doc_starts, "candidates")

    def _paragraphs(self, hashes: np.ndarray, positions: np.ndarray, lo: int, hi: int | None) -> None:
        # ``positions`` ascend (shards in order), so np.unique's first index is the first occurrence.
        unique, first = np.unique(hashes, return_index=True)
        duplicate = np.ones(len(hashes), dtype=bool)
        duplicate[first] = False
        del first
        with self._timed():
            for old in self.earlier:
                seen = old.paragraph_slice(lo, hi)
                if len(seen) and len(hashes):
                    pos = np.minimum(np.searchsorted(seen, hashes), len(seen) - 1)
                    duplicate |= seen[pos] == hashes
        self.paragraph_part.append(unique)
        dup_positions = positions[duplicate]
        self._by_group(dup_positions, dup_positions, self.group_para_starts, "duplicate_paragraphs")

    # -- pass 3: per group of shards
    def _similarities(self, cands: np.ndarray) -> np.ndarray:
        """Estimated Jaccard of each candidate pair (signature rows read in chunks)."""
        sims = np.empty(len(cands), dtype=np.float64)
        sigs_path = os.path.join(self.folder, "sigs.npy")
        for start in range(0, len(cands), self.similarity_chunk):
            c = cands[start : start + self.similarity_chunk]
            table = np.load(sigs_path, mmap_mode="r")  # mapped per chunk: touched pages are let go
            own = np.asarray(table[c["doc"]])
            other = np.empty_like(own)
            new = c["earlier"] == 0
            other[new] = table[c["cand"][new]]
            del table
            with self._timed():
                for e, old in enumerate(self.earlier):
                    mine = ~new & (c["cand"] >= self.earlier_offsets[e]) & (c["cand"] < self.earlier_offsets[e + 1])
                    if mine.any():
                        other[mine] = old.signature_rows(c["cand"][mine] - self.earlier_offsets[e])
            sims[start : start + len(c)] = estimated_jaccard(own, other)
        return sims

    def _decide(self, group: _Group) -> tuple[np.ndarray, np.ndarray]:
        """``(dup_of, similarity)`` of the group's documents (``dup_of`` encoded as in the module doc)."""
        d0, d1 = group.docs
        dup_of = np.full(d1 - d0, -1, dtype=np.int64)
        similarity = np.zeros(d1 - d0, dtype=np.float32)
        cands = group.candidates.read()
        if not len(cands):
            return dup_of, similarity
        sims = self._similarities(cands)
        passed = sims >= self.config.threshold
        for earlier in (1, 0):  # earlier drops take precedence, then this drop; the first band wins
            sel = np.flatnonzero(passed & (cands["earlier"] == earlier))
            if not len(sel):
                continue
            sel = sel[np.lexsort((cands["band"][sel], cands["doc"][sel]))]
            doc = cands["doc"][sel]
            sel = sel[np.concatenate([[True], doc[1:] != doc[:-1]])]
            local = cands["doc"][sel] - d0
            free = dup_of[local] == -1
            sel, local = sel[free], local[free]
            dup_of[local] = -2 - cands["cand"][sel] if earlier else cands["cand"][sel]
            similarity[local] = sims[sel]
        return dup_of, similarity

    def _duplicate_ids(self, dup_of: np.ndarray) -> dict[int, str]:
        """Ids of what the documents of one shard duplicate, keyed by the encoded ``dup_of``."""
        out: dict[int, str] = {}
        new = np.unique(dup_of[dup_of >= 0])
        if len(new):
            table = np.load(os.path.join(self.folder, "ids.npy"), mmap_mode="r")
            out.update(zip(new.tolist(), (str(x) for x in table[new]), strict=True))
            del table
        old = np.unique(-2 - dup_of[dup_of <= -2])
        with self._timed():
            for e, index in enumerate(self.earlier):
                mine = old[(old >= self.earlier_offsets[e]) & (old < self.earlier_offsets[e + 1])]
                if len(mine):
                    ids = index.id_rows(mine - self.earlier_offsets[e])
                    out.update(zip((-2 - mine).tolist(), ids, strict=True))
        return out

    def _decide_and_write(self) -> dict[str, Any]:
        samples: list[dict[str, Any]] = []
        counts = {"paragraph_duplicates": 0, "documents_with_duplicate_paragraphs": 0, "within": 0, "cross": 0}
        for group in self.groups:
            dup_of, similarity = self._decide(group)
            counts["within"] += int((dup_of >= 0).sum())
            counts["cross"] += int((dup_of <= -2).sum())
            duplicate_paragraphs = np.sort(group.duplicate_paragraphs.read())
            counts["paragraph_duplicates"] += len(duplicate_paragraphs)
            for s in group.shards:
                info = self.shards[s]
                arrays = self._spill(s, ("ids", "para_doc", "para_start", "para_end"))
                p0 = int(self.para_offsets[s])
                local = (
                    duplicate_paragraphs[
                        np.searchsorted(duplicate_paragraphs, p0) : np.searchsorted(
                            duplicate_paragraphs, p0 + info.paragraphs
                        )
                    ]
                    - p0
                )
                spans: dict[int, list[list[float]]] = {}
                for d, a, b in zip(
                    arrays["para_doc"][local], arrays["para_start"][local], arrays["para_end"][local], strict=True
                ):
                    spans.setdefault(int(d), []).append([int(a), int(b), 1.0])
                counts["documents_with_duplicate_paragraphs"] += len(spans)
                first = int(self.doc_offsets[s]) - group.docs[0]
                shard_dup = dup_of[first : first + info.documents]
                shard_sim = similarity[first : first + info.documents]
                names = self._duplicate_ids(shard_dup)
                out = []
                for i, doc_id in enumerate(arrays["ids"].tolist()):
                    of = names.get(int(shard_dup[i])) if shard_dup[i] != -1 else None
                    out.append(
                        {
                            "id": doc_id,
                            "attributes": {
                                self.config.attribute_name: spans.get(i, []),
                                FUZZY_DUPLICATE: 1 if of is not None else 0,
                                f"{FUZZY_DUPLICATE}_of": of,
                                "fuzzy_similarity": round(float(shard_sim[i]), 4),
                            },
                        }
                    )
                    if of is not None and len(samples) < 5:
                        samples.append({"id": doc_id, "duplicate_of": of, "similarity": round(float(shard_sim[i]), 3)})
                # Mirrored (a single-file input: its name), compressed as named -- Marin's layout.
                write_jsonl_shard(attribute_file(self.config, info.shard), out)
        return {
            "documents_in": self.documents,
            "paragraphs": int(self.para_offsets[-1]),
            "paragraph_duplicates": counts["paragraph_duplicates"],
            "documents_with_duplicate_paragraphs": counts["documents_with_duplicate_paragraphs"],
            "fuzzy_duplicates": counts["within"] + counts["cross"],
            "fuzzy_duplicates_within_drop": counts["within"],
            "fuzzy_duplicates_of_earlier_drops": counts["cross"],
            "samples": table_markdown(samples),
        }


class _Timer:
    """Adds the block's wall time to ``DropDedup.index_seconds`` (the part that grows with N)."""

    def __init__(self, owner: DropDedup) -> None:
        self.owner = owner

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.owner.index_seconds += time.monotonic() - self.start


def _cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
