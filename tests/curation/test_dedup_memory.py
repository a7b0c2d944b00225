"""Dedup in bounded memory: a tiny ``memory_budget_mb`` spills (many hash ranges, many shard
groups) and removes exactly what one in-memory pass over the whole drop removes; the drop-wide
passes' peak allocation stays near the budget whatever the drop size.

Documents are generated straight into text shards (no HTML stage): word soup with planted exact
and near duplicates within and across drops, shared paragraphs, and documents without words.
"""

from __future__ import annotations

import io
import os
import tracemalloc

import numpy as np
import pytest

from marin_assets.core.io import list_files, read_jsonl_gz, write_jsonl_gz
from marin_assets.execution.storage import list_dir
from marin_assets.processing.classification import dedup_passes
from marin_assets.processing.classification.dedupe import DedupeConfig, dedupe, hash_shard
from marin_assets.processing.classification.minhash import estimated_jaccard

WORDS = np.array([f"w{i}" for i in range(3000)])


def _drop_texts(rng: np.random.Generator, n: int, earlier: list[str]) -> list[str]:
    """``n`` texts: fresh ones, near copies of this drop and of earlier drops, shared paragraphs."""
    shared = [" ".join(rng.choice(WORDS, 12)) for _ in range(20)]
    texts: list[str] = []
    for i in range(n):
        kind = rng.random()
        pool = texts if (kind < 0.85 or not earlier) else earlier
        if kind < 0.7 or not pool:
            lines = [" ".join(rng.choice(WORDS, int(rng.integers(8, 30)))) for _ in range(int(rng.integers(2, 6)))]
            if rng.random() < 0.3:
                lines.insert(int(rng.integers(0, len(lines))), shared[int(rng.integers(0, len(shared)))])
            texts.append("\n".join(lines) if rng.random() > 0.02 else "!!! ??? ...")
        else:
            source = pool[int(rng.integers(0, len(pool)))].split(" ")
            for _ in range(int(rng.integers(0, 4))):  # 0 edits: an exact copy
                source[int(rng.integers(0, len(source)))] = str(rng.choice(WORDS))
            texts.append(" ".join(source))
        del i
    return texts


def _write_text_drop(folder: str, drop: str, texts: list[str], per_shard: int) -> str:
    path = os.path.join(folder, "text", drop)
    for s in range(0, len(texts), per_shard):
        records = [{"id": f"{drop}/{s + j}", "text": t} for j, t in enumerate(texts[s : s + per_shard])]
        write_jsonl_gz(os.path.join(path, "docs", f"shard-{s // per_shard:05d}.jsonl.gz"), records)
    return path


@pytest.fixture(scope="module")
def drops(tmp_path_factory) -> tuple[str, list[tuple[str, str]]]:
    folder = str(tmp_path_factory.mktemp("dedup-memory"))
    rng = np.random.default_rng(7)
    out, earlier = [], []
    for drop, n in (("drop-1", 900), ("drop-2", 700), ("drop-3", 1200)):
        texts = _drop_texts(rng, n, earlier)
        out.append((drop, _write_text_drop(folder, drop, texts, per_shard=60)))
        earlier += texts
    return folder, out


def _run(folder: str, drops: list[tuple[str, str]], name: str, **kwargs) -> tuple[dict, list[dict]]:
    """Dedup every drop in order into ``<folder>/<name>``; (attributes by drop, metadata by drop)."""
    attrs, metas = {}, []
    for drop, text in drops:
        out = os.path.join(folder, name, drop)
        metas.append(dedupe(DedupeConfig(text, out, drop_id=drop, **kwargs)))
        files = list_files(os.path.join(out, "docs"), ".jsonl.gz")
        attrs[drop] = [r for f in files for r in read_jsonl_gz(f)]
    return attrs, metas


def _in_memory_reference(drops: list[tuple[str, str]], config: DedupeConfig) -> dict:
    """The first implementation, one in-memory pass per drop over everything: the oracle."""
    params = config.params
    old_ids, old_sigs, old_keys, old_valid, old_paras = [], [], [], [], []
    out = {}
    for drop, text in drops:
        shards = [hash_shard(f, params, config.min_paragraph_chars) for f in list_files(f"{text}/docs", ".jsonl.gz")]
        offsets = np.cumsum([0] + [len(h["ids"]) for h in shards])
        ids = [i for h in shards for i in h["ids"]]
        sigs, keys = np.concatenate([h["sigs"] for h in shards]), np.concatenate([h["keys"] for h in shards])
        valid = np.concatenate([h["has_words"] for h in shards])
        para_doc = np.concatenate([h["para_doc"] + offsets[k] for k, h in enumerate(shards)])
        starts, ends = (
            np.concatenate([h["para_start"] for h in shards]),
            np.concatenate([h["para_end"] for h in shards]),
        )
        hashes = np.concatenate([h["para_hash"] for h in shards])
        dup = np.isin(hashes, np.concatenate(old_paras)) if old_paras else np.zeros(len(hashes), bool)
        _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        dup |= first[inverse] != np.arange(len(hashes))
        prior_ids = [i for part in old_ids for i in part]
        dup_of, sim = _find_duplicates(
            keys,
            sigs,
            np.concatenate(old_keys) if old_keys else np.zeros((0, params.bands), np.uint64),
            np.concatenate(old_sigs) if old_sigs else np.zeros((0, params.num_perm), np.uint32),
            config.threshold,
            valid,
            np.concatenate(old_valid) if old_valid else np.zeros(0, bool),
        )
        spans_by_doc: dict[int, list] = {}
        for d, s, e in zip(para_doc[dup], starts[dup], ends[dup], strict=True):
            spans_by_doc.setdefault(int(d), []).append([int(s), int(e), 1.0])
        records = []
        for i, doc_id in enumerate(ids):
            j = int(dup_of[i])
            of = None if j == -1 else (ids[j] if j >= 0 else prior_ids[-2 - j])
            spans = spans_by_doc.get(i, [])
            records.append(
                {
                    "id": doc_id,
                    "attributes": {
                        "duplicate_text": spans,
                        "fuzzy_duplicate": int(of is not None),
                        "fuzzy_duplicate_of": of,
                        "fuzzy_similarity": round(float(sim[i]), 4),
                    },
                }
            )
        out[drop] = records
        old_ids.append(ids)
        old_sigs.append(sigs)
        old_keys.append(keys)
        old_valid.append(valid)
        old_paras.append(np.unique(hashes))
    return out


def _find_duplicates(keys, sigs, old_keys, old_sigs, threshold, valid, old_valid):
    """The first implementation's fuzzy pass (all band keys of every drop in memory)."""
    n = keys.shape[0]
    dup_of = np.full(n, -1, dtype=np.int64)
    sim = np.zeros(n, dtype=np.float32)
    if old_keys.shape[0]:
        for band in range(keys.shape[1]):
            oidx = np.flatnonzero(old_valid)
            okeys = old_keys[oidx, band]
            order = np.argsort(okeys, kind="stable")
            sorted_keys = okeys[order]
            pos = np.searchsorted(sorted_keys, keys[:, band])
            pos_c = np.minimum(pos, len(sorted_keys) - 1)
            hit = (pos < len(sorted_keys)) & (sorted_keys[pos_c] == keys[:, band]) & valid & (dup_of == -1)
            cand = np.flatnonzero(hit)
            other = oidx[order[pos_c[cand]]]
            s = estimated_jaccard(sigs[cand], old_sigs[other])
            ok = s >= threshold
            dup_of[cand[ok]], sim[cand[ok]] = -2 - other[ok], s[ok]
    for band in range(keys.shape[1]):
        idx = np.flatnonzero(valid)
        order = np.argsort(keys[idx, band], kind="stable")
        sk, si = keys[idx, band][order], idx[order]
        new_group = np.concatenate([[True], sk[1:] != sk[:-1]])
        leader = si[np.maximum.accumulate(np.where(new_group, np.arange(len(si)), 0))]
        docs, leaders = si[~new_group], leader[~new_group]
        todo = dup_of[docs] == -1
        docs, leaders = docs[todo], leaders[todo]
        s = estimated_jaccard(sigs[docs], sigs[leaders])
        ok = s >= threshold
        dup_of[docs[ok]], sim[docs[ok]] = leaders[ok], s[ok]
    return dup_of, sim


@pytest.mark.parametrize("threshold", [0.7, 0.0])
def test_tiny_budget_spills_and_removes_the_same_documents(drops, threshold):
    folder, chain = drops
    big, big_meta = _run(folder, chain, f"big-{threshold}", threshold=threshold, memory_budget_mb=1024)
    tiny, tiny_meta = _run(folder, chain, f"tiny-{threshold}", threshold=threshold, memory_budget_mb=0.08)
    assert [m["hash_ranges"] for m in big_meta] == [1, 1, 1]
    assert [m["shard_groups"] for m in big_meta] == [1, 1, 1]
    assert min(m["hash_ranges"] for m in tiny_meta) >= 4, tiny_meta
    assert min(m["shard_groups"] for m in tiny_meta) >= 3, tiny_meta
    assert tiny == big
    reference = _in_memory_reference(chain, DedupeConfig("", "", drop_id="", threshold=threshold))
    assert big == reference
    last = tiny_meta[-1]
    # The data must exercise every kind of removal, or the comparison proves little.
    assert last["fuzzy_duplicates_within_drop"] > 20 and last["fuzzy_duplicates_of_earlier_drops"] > 20, last
    assert last["paragraph_duplicates"] > 20 and last["earlier_index_documents"] == 1600
    assert sum(r["attributes"]["fuzzy_similarity"] < 1 for r in tiny["drop-3"] if r["attributes"]["fuzzy_duplicate"])


def test_index_of_the_first_format_is_read(drops, tmp_path):
    """Indices written before the on-disk format (minhash.npz + paragraphs.npy) still count."""
    folder, chain = drops
    config = DedupeConfig("", "", drop_id="")
    new_attrs, _ = _run(str(tmp_path), chain, "new")
    # drop-1's index rewritten as the first implementation wrote it.
    first = tmp_path / "new" / "drop-1" / "index"
    shards = [hash_shard(f, config.params, 30) for f in list_files(f"{chain[0][1]}/docs", ".jsonl.gz")]
    buf = io.BytesIO()
    np.savez(
        buf,
        ids=np.array([i for h in shards for i in h["ids"]], dtype=str),
        sigs=np.concatenate([h["sigs"] for h in shards]),
        keys=np.concatenate([h["keys"] for h in shards]),
        has_words=np.concatenate([h["has_words"] for h in shards]),
    )
    for name in ("ids.npy", "sigs.npy", "bands.npy", "paragraphs.npy"):
        (first / name).unlink()
    (first / "minhash.npz").write_bytes(buf.getvalue())
    np.save(first / "paragraphs.npy", np.unique(np.concatenate([h["para_hash"] for h in shards])))
    (first / "_COMPLETE").write_text('{"drop_id": "drop-1", "documents": 900}')
    again, metas = _run(str(tmp_path), chain[1:2], "new")
    assert metas[0]["fuzzy_duplicates_of_earlier_drops"] > 0
    assert again["drop-2"] == new_attrs["drop-2"]


@pytest.fixture
def pass_peaks(monkeypatch) -> list[int]:
    """Peak bytes allocated during each run of the drop-wide passes (tracemalloc sees numpy's buffers)."""
    peaks: list[int] = []
    original = dedup_passes.DropDedup.run

    def traced(self):
        tracemalloc.start()
        try:
            return original(self)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr(dedup_passes.DropDedup, "run", traced)
    return peaks


def _pass_peak(peaks: list[int], folder: str, text: str, name: str, budget: float) -> int:
    dedupe(DedupeConfig(text, os.path.join(folder, name, "drop-1"), drop_id="drop-1", memory_budget_mb=budget))
    return peaks[-1]


def test_peak_of_the_drop_wide_passes_follows_the_budget_not_the_drop(tmp_path, pass_peaks):
    rng = np.random.default_rng(11)
    small = _write_text_drop(str(tmp_path / "small"), "drop-1", _drop_texts(rng, 600, []), per_shard=120)
    large = _write_text_drop(str(tmp_path / "large"), "drop-1", _drop_texts(rng, 2400, []), per_shard=120)
    budget = 0.25
    _pass_peak(pass_peaks, str(tmp_path), small, "warm-up", budget)  # first-time imports are not working memory
    bounded_small = _pass_peak(pass_peaks, str(tmp_path), small, "bs", budget)
    bounded_large = _pass_peak(pass_peaks, str(tmp_path), large, "bl", budget)
    unbounded_small = _pass_peak(pass_peaks, str(tmp_path), small, "us", 1024)
    unbounded_large = _pass_peak(pass_peaks, str(tmp_path), large, "ul", 1024)
    # Without a bound the passes hold the drop (4x the documents, ~4x the memory) ...
    assert unbounded_large > 3 * unbounded_small
    # ... with one, 4x the documents take more passes, not more memory.
    assert bounded_large < 1.3 * bounded_small + (64 << 10), (bounded_small, bounded_large)
    # The budget bounds the range and group passes; one shard's attribute records come on top.
    assert bounded_large < budget * 2**20 + (1 << 20), pass_peaks
    assert bounded_large * 3 < unbounded_large, pass_peaks


def test_index_on_an_object_store(drops, gcs_prefix):
    """Output on gs:// (a real GCS API server): spill, index upload and earlier indices fetched by copy."""
    folder, chain = drops
    local, _ = _run(folder, chain[:2], "local-for-gcs", memory_budget_mb=0.3)
    attrs, metas = {}, []
    for drop, text in chain[:2]:
        out = f"{gcs_prefix}/dedup/{drop}"
        metas.append(dedupe(DedupeConfig(text, out, drop_id=drop, memory_budget_mb=0.3)))
        attrs[drop] = [r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)]
        names = {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in list_dir(f"{out}/index")}
        assert names == {"ids.npy", "sigs.npy", "bands.npy", "paragraphs.npy", "_COMPLETE"}, names  # spill gone
    assert metas[1]["earlier_drops_indexed"] == ["drop-1"] and metas[1]["fuzzy_duplicates_of_earlier_drops"] > 0
    assert attrs == local
