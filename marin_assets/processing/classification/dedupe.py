"""Stage 4, Marin's ``marin.processing.classification.dedupe``: duplicate attributes.

``dedupe(DedupeConfig(input_path, output_path, ...))`` writes, for every ``**/*.<input_filetype>``
file below ``input_path``, an attribute file at the same relative path below ``output_path``
(Marin's layout, which ``consolidate`` reads by that path), one record per document::

    {"id": ..., "attributes": {<attribute_name>: [[start, end, score], ...]}}   # duplicate spans

Two modes, chosen by Marin's ``decontaminate`` flag:

**Deduplication** (default): exact paragraph dedup plus fuzzy (MinHash-LSH) document dedup. The
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

**Decontamination** (``decontaminate=True``): every paragraph of ``decontaminate_path``'s documents
is indexed; a paragraph of the input is marked when it occurs there (``ngram=None``: the whole
normalised paragraph; span score 1.0) or when at least ``ngram.overlap_threshold`` of its word
n-grams (``ngram.ngram_length`` words, every ``stride``-th n-gram; a shorter paragraph is one
n-gram) occur there (span score: the overlapping share). A list of n-gram lengths writes one
attribute tree per length, ``<output_path>/<n>/...`` with attribute ``<attribute_name>_<n>``.
Marin runs dolma's Bloom filter; here the set is exact (no false positives), so
``bloom_filter_size``, ``estimated_doc_count``, ``false_positive_rate`` and ``bloom_filter_path``
are accepted and change nothing; the source's n-grams are held in memory.

``min_length`` / ``min_words``: paragraphs with fewer characters / words are never marked (dolma's
options); ``min_paragraph_chars`` is ours (normalised characters, for the pipeline's dedup).
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
    find_shards,
    read_shard,
    write_shard,
)
from marin_assets.execution.attempt import published_path
from marin_assets.execution.storage import atomic_write_bytes, exists, filesystem, join_path
from marin_assets.landing.zone import drop_sort_key, valid_drops_in
from marin_assets.processing.classification.dedup_index import INDEX_COMPLETE
from marin_assets.processing.classification.minhash import MinHashParams, band_keys, signatures

_NORMALISE = re.compile(r"[^0-9a-z]+")
FUZZY_DUPLICATE = "fuzzy_duplicate"


@dataclass(frozen=True)
class NGramConfig:
    """Marin's n-gram matching options (decontamination).

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
    """Marin's dedupe config, plus ours for the incremental pipeline (from ``drop_id`` on).

    Attributes:
        input_path: folder of documents (any depth; our text stage's output for a drop).
        output_path: where the attribute files (mirrored), ``index/`` and ``quarantine/`` go; for a
            drop, ``<step output>/<drop>`` -- siblings are earlier drops.
        attribute_name: key of the duplicate spans in each record's ``attributes``.
        min_length, min_words: shorter paragraphs (characters, words) are never marked.
        bloom_filter_size, estimated_doc_count, false_positive_rate, bloom_filter_path: Marin's
            Bloom filter sizing; accepted, no effect (the set here is exact).
        ngram: n-gram matching of decontamination (None: whole paragraphs).
        processes: Marin's worker count; shards run on the engine's pool here.
        decontaminate: mark paragraphs of the input found in ``decontaminate_path``.
        decontaminate_path: the documents to decontaminate against.
        input_filetype: extension of the input (and source) files.
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

    input_path: str
    output_path: str
    attribute_name: str = "duplicate_text"
    min_length: int = 0
    min_words: int = 0
    bloom_filter_size: int | None = None
    estimated_doc_count: int = 1_000_000
    false_positive_rate: float = 0.001
    ngram: NGramConfig | None = None
    processes: int = 1
    decontaminate: bool = False
    decontaminate_path: str | None = None
    input_filetype: str = "jsonl.gz"
    bloom_filter_path: str | None = None
    drop_id: str | None = None
    landing_dir: str | None = None
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


def attribute_file(config: DedupeConfig, shard: str, output_path: str | None = None) -> str:
    """The attribute file of input ``shard``: its path relative to the input, below the output."""
    base = config.input_path.rstrip("/") + "/"
    rel = shard[len(base) :] if shard.startswith(base) else shard.rstrip("/").rsplit("/", 1)[-1]
    return join_path(output_path or config.output_path, rel)


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


def _too_short(paragraph: str, min_length: int, min_words: int) -> bool:
    """dolma's ``min_length`` / ``min_words``: such a paragraph is never marked."""
    return len(paragraph) < min_length or (min_words > 0 and len(paragraph.split()) < min_words)


# Bytes of a lower-cased, UTF-8 encoded text -> the bytes of its normalised form: ASCII letters and
# digits stay, newlines stay (they separate paragraphs), every other byte (non-ASCII included) is a
# space -- what ``_NORMALISE.sub(" ", text.lower())`` keeps, with runs of spaces left to ``split``.
_NORMALISE_BYTES = bytes(c if c in b"0123456789abcdefghijklmnopqrstuvwxyz\n" else 32 for c in range(256))


def hashed_paragraphs(
    text: str, min_paragraph_chars: int, min_length: int = 0, min_words: int = 0
) -> list[tuple[int, int, int]]:
    """``(start, end, paragraph_hash)`` of the paragraphs of ``text`` that dedup indexes.

    The same paragraphs and hashes as :func:`paragraph_spans` + :func:`paragraph_hash` (skipping
    those with fewer than ``min_paragraph_chars`` normalised characters, or ``_too_short``), but the
    whole text is lower-cased, encoded and normalised in three calls instead of two regex passes
    per paragraph: this loop ran over every paragraph of every drop and was a third of the stage's
    CPU (a quarter of it now).
    """
    # ``lower`` maps characters one by one and never makes or removes a newline, and a newline
    # byte never occurs inside a multi-byte UTF-8 sequence: line i of ``normalised`` is line i of
    # ``text``, normalised. Lone surrogates become "?" (a separator, as for the regex).
    normalised = text.lower().encode("utf-8", "replace").translate(_NORMALISE_BYTES).split(b"\n")
    out = []
    pos = 0
    for line, norm in zip(text.split("\n"), normalised, strict=True):
        end = pos + len(line)
        # The normalised length counts letters and digits only; a line with none is blank or has no
        # words (paragraph_hash: None) and is never indexed.
        chars = len(norm) - norm.count(b" ")
        if chars and chars >= min_paragraph_chars and not _too_short(line, min_length, min_words):
            digest = hashlib.blake2b(b" ".join(norm.split()), digest_size=8).digest()
            out.append((pos, end, int.from_bytes(digest, "little")))
        pos = end + 1
    return out


def hash_shard(
    path: str, params: MinHashParams, min_paragraph_chars: int, min_length: int = 0, min_words: int = 0
) -> dict[str, Any]:
    """Ids, MinHash signatures and paragraph hashes of one shard (a Ray task)."""
    ids: list[str] = []
    texts: list[str] = []
    para_doc: list[int] = []
    paragraphs: list[tuple[int, int, int]] = []
    for i, rec in enumerate(read_shard(path)):
        ids.append(rec["id"])
        text = rec["text"]
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
    """Step function (Marin's name): write the duplicate attributes; returns materialization metadata.

    Raises:
        ValueError: ``decontaminate`` without ``decontaminate_path``, or ``ngram`` without
            ``decontaminate`` (n-gram matching is a decontamination option here).
        RuntimeError: ``landing_dir`` names earlier drops whose index is not complete yet.
    """
    start = time.monotonic()
    if config.decontaminate:
        if not config.decontaminate_path:
            raise ValueError("DedupeConfig.decontaminate=True needs decontaminate_path (the documents to match)")
        return _decontaminate(config, start)
    if config.ngram is not None:
        raise ValueError(
            "DedupeConfig.ngram applies to decontamination here (decontaminate=True); deduplication matches "
            "whole paragraphs and MinHash document signatures (minhash_ngram)"
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
    return _DedupStage(config, done, pending, start).run()


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
        return find_shards(self.input_path, f".{self.config.input_filetype}")

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        with counters.timer("hash"):
            hashed = hash_shard(
                shard,
                self.config.params,
                self.config.min_paragraph_chars,
                self.config.min_length,
                self.config.min_words,
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
        from marin_assets.processing.classification.dedup_passes import DropDedup, ShardInfo

        shards = [
            ShardInfo(r.shard, spill_path(self.config.output_path, self.relative_path(r.shard)), **r.extra)
            for r in shard_results
        ]
        meta = DropDedup(self.config, shards, self.done).run()
        meta["earlier_drops_without_index"] = self.pending
        meta["seconds"] = round(time.monotonic() - self.start, 3)
        return meta


# ------------------------------------------------------------------------------------------
# Decontamination


def _words(paragraph: str) -> list[str]:
    return _NORMALISE.sub(" ", paragraph.lower()).split()


def _ngram_hashes(words: list[str], n: int, stride: int) -> list[int]:
    """64-bit hashes of the ``n``-word n-grams of ``words``, every ``stride``-th (a short paragraph: one)."""
    if not words:
        return []
    grams = [words] if len(words) <= n else [words[i : i + n] for i in range(0, len(words) - n + 1, stride)]
    return [
        int.from_bytes(hashlib.blake2b(" ".join(g).encode("utf-8"), digest_size=8).digest(), "little") for g in grams
    ]


def _source_keys(config: DedupeConfig, n: int | None) -> set[int]:
    """Every paragraph hash (``n`` None) or every word n-gram hash of the source documents."""
    keys: set[int] = set()
    sources = find_shards(config.decontaminate_path or "", f".{config.input_filetype}")
    if not sources:
        raise FileNotFoundError(f"no *.{config.input_filetype} documents below {config.decontaminate_path}")
    for path in sources:
        for rec in read_shard(path):
            text = rec.get("text")
            if not isinstance(text, str):
                continue
            for start, end in paragraph_spans(text):
                para = text[start:end]
                if n is None:
                    h = paragraph_hash(para)
                    if h is not None:
                        keys.add(h)
                else:
                    keys.update(_ngram_hashes(_words(para), n, 1))
    return keys


class _DecontaminateStage(ShardStage):
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
        return find_shards(self.input_path, f".{self.config.input_filetype}")

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        ngram = self.config.ngram
        stride = max(1, ngram.stride or 1) if ngram else 1
        out = []
        for i, rec in enumerate(read_shard(shard)):
            text = rec.get("text")
            if not isinstance(text, str):
                quarantine.add("no_text", f"text is {type(text).__name__}", line=i + 1, doc_id=rec.get("id"))
                continue
            spans: list[list[float]] = []
            for start, end in paragraph_spans(text):
                para = text[start:end]
                if _too_short(para, self.config.min_length, self.config.min_words):
                    continue
                if self.n is None or ngram is None:
                    h = paragraph_hash(para)
                    if h is not None and h in self.keys:
                        spans.append([start, end, 1.0])
                    continue
                grams = _ngram_hashes(_words(para), self.n, stride)
                if not grams:
                    continue
                share = sum(g in self.keys for g in grams) / len(grams)
                if share >= ngram.overlap_threshold:
                    spans.append([start, end, round(share, 4)])
            counters.add("documents_in")
            counters.add("paragraphs_marked", len(spans))
            counters.add("documents_with_overlap", 1 if spans else 0)
            out.append({"id": rec.get("id"), "attributes": {self.attribute: spans}})
        write_shard(join_path(self.output_path, self.relative_path(shard)), out)
        return None


def _decontaminate(config: DedupeConfig, start: float) -> dict[str, Any]:
    lengths: list[int | None]
    if config.ngram is None:
        lengths = [None]
    elif isinstance(config.ngram.ngram_length, int):
        lengths = [config.ngram.ngram_length]
    else:
        lengths = list(config.ngram.ngram_length)
    several = len(lengths) > 1
    meta: dict[str, Any] = {}
    for n in lengths:
        keys = _source_keys(config, n)
        output = join_path(config.output_path, str(n)) if several else config.output_path
        attribute = f"{config.attribute_name}_{n}" if several else config.attribute_name
        result = _DecontaminateStage(config, n, keys, output, attribute).run()
        prefix = f"ngram_{n}/" if several else ""
        meta.update({f"{prefix}{k}": v for k, v in result.items()})
        meta[f"{prefix}source_keys"] = len(keys)
    meta["seconds"] = round(time.monotonic() - start, 3)
    return meta
