"""Our Levanter-cache writer: Levanter's tokens and files, Levanter's reader, resume after a kill, gs://."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marin_assets.core.io import write_jsonl_shard
from marin_assets.processing.tokenize.cache_encoding import cache_format, encode_block
from marin_assets.processing.tokenize.cache_writer import build_cache, read_cache_ledger, shard_names
from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize
from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

REPO = Path(__file__).resolve().parents[2]
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "returns",
    "a",
    "value",
    "of",
    "the",
    "function",
    "Élan",
    "数据",
    "emoji",
    "🎉",
    "tab\tnew\nline",
]
FIELDS = ("input_ids", "token_type_ids")


def _texts(seed: int, count: int, max_words: int = 200) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, max_words))) for _ in range(count)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tokenizer and three document files (gzip, zstd, plain) with edge cases."""
    root = tmp_path_factory.mktemp("cache-writer")
    texts = _texts(0, 900)
    texts[5] = ""  # empty document
    texts[7] = "x" * 12_000 + " " + "y " * 50  # longer than Levanter's long-string split
    texts[9] = "a literal <|end_of_text|> inside"  # special token text is matched as the token
    tokenizer = build_fast_tokenizer(texts, 400, ("<|begin_of_text|>", "<|end_of_text|>", "<|pad|>", "<|unk|>"))
    tokenizer.save_pretrained(root / "tok")
    files = []
    for i, suffix in enumerate((".jsonl.gz", ".jsonl.zst", ".jsonl")):
        path = root / "docs" / f"part-{i}{suffix}"
        write_jsonl_shard(str(path), [{"id": n, "text": t} for n, t in enumerate(texts[i::3])])
        files.append(str(path))
    return {"root": root, "tokenizer": str(root / "tok"), "files": files}


def _arrays(split_path: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``field -> (offsets[0..rows], data[:size])`` read with Levanter's own store classes."""
    from levanter.store.cache import TreeCache

    exemplar = {field: np.zeros((0,), dtype=np.int64) for field in FIELDS}
    store = TreeCache.load(split_path, exemplar).store
    out = {}
    for field in FIELDS:
        jagged = store.tree[field]
        rows, size = jagged.num_rows, jagged.data_size
        out[field] = (jagged.offsets[: rows + 1].read().result(), jagged.data[:size].read().result())
    return out


def _assert_same_cache(ours: str, theirs: str) -> None:
    a, b = _arrays(ours), _arrays(theirs)
    for field in FIELDS:
        np.testing.assert_array_equal(a[field][0], b[field][0], err_msg=f"{field} offsets")
        np.testing.assert_array_equal(a[field][1], b[field][1], err_msg=f"{field} data")


@pytest.mark.slow  # Levanter's builder needs Ray: ~30 s idle, minutes on a busy 2-core machine
def test_same_tokens_ledger_and_files_as_levanter_builder(ray_session, corpus, tmp_path):
    """Both writers through the tokenize step's ``writer`` flag: identical arrays, ledger, zarr metadata."""
    common = dict(train_paths=corpus["files"], validation_paths=[], tokenizer=corpus["tokenizer"])
    ours = tokenize(TokenizeConfig(cache_path=str(tmp_path / "marin"), writer="marin", **common))
    theirs = tokenize(TokenizeConfig(cache_path=str(tmp_path / "levanter"), writer="levanter", **common))
    assert ours["writer"] == "marin" and theirs["writer"] == "levanter"
    assert ours["documents"] == theirs["documents"] == 900
    assert ours["tokens"] == theirs["tokens"] > 900 * 2

    our_split, their_split = str(tmp_path / "marin/train"), str(tmp_path / "levanter/train")
    _assert_same_cache(our_split, their_split)
    our_ledger, their_ledger = read_cache_ledger(our_split), read_cache_ledger(their_split)
    assert our_ledger["field_counts"] == {"input_ids": ours["tokens"]}
    for key in ("total_num_rows", "shard_rows", "is_finished", "finished_shards", "metadata"):
        assert our_ledger[key] == their_ledger[key], key
    assert our_ledger["metadata"]["preprocessor_metadata"]["append_bos"] is True
    for array in ("input_ids/data", "input_ids/offsets", "token_type_ids/data", "token_type_ids/offsets"):
        our_meta = json.loads(Path(our_split, array, "zarr.json").read_text())
        assert our_meta == json.loads(Path(their_split, array, "zarr.json").read_text()), array
    # Rows are bos ... eos, as Levanter enforces them with this tokenizer.
    offsets, data = _arrays(our_split)["input_ids"]
    assert data[0] == 0 and data[offsets[1] - 1] == 1


def test_same_files_as_levanter_serial_writer(corpus, tmp_path, monkeypatch):
    """Without Ray: Levanter's BatchTokenizer + SerialCacheWriter on the same documents, same store.

    Our side runs on the process pool (small inputs are otherwise encoded in process).
    """
    from marin_assets.processing.tokenize import cache_writer

    monkeypatch.setattr(cache_writer, "SMALL_INPUT_BYTES", 0)
    from levanter.data.text import BatchTokenizer
    from levanter.store.cache import CacheMetadata, SerialCacheWriter
    from transformers import AutoTokenizer

    from marin_assets.core.io import read_jsonl

    processor = BatchTokenizer(AutoTokenizer.from_pretrained(corpus["tokenizer"]))
    theirs = str(tmp_path / "levanter/train")
    with SerialCacheWriter(theirs, processor.output_exemplar, CacheMetadata(processor.metadata)) as writer:
        for path in corpus["files"]:
            records = list(read_jsonl(path))
            for start in range(0, len(records), 128):
                writer.write_batch(processor(records[start : start + 128]))
    ours = str(tmp_path / "marin/train")
    build_cache(corpus["files"], ours, corpus["tokenizer"], workers=2)
    _assert_same_cache(ours, theirs)
    assert read_cache_ledger(ours)["metadata"] == read_cache_ledger(theirs)["metadata"]
    for array in ("input_ids/data", "input_ids/offsets", "token_type_ids/offsets"):
        assert Path(ours, array, "zarr.json").read_text() == Path(theirs, array, "zarr.json").read_text(), array


def test_levanter_training_data_path_reads_our_cache(corpus, tmp_path):
    """Levanter's data config loads our cache without building, and its token dataset reads the tokens."""
    import asyncio

    from levanter.data.text import TokenSeqDataset, UrlSingleDatasetLMConfig, cached_token_count

    meta = build_cache(corpus["files"], str(tmp_path / "cache/train"), corpus["tokenizer"], workers=2)
    assert meta["finished"] and meta["documents"] == 900
    config = UrlSingleDatasetLMConfig(tokenizer=corpus["tokenizer"], cache_dir=str(tmp_path / "cache"))
    cache = config.build_or_load_cache("train", monitors=False)  # no sources: it must load ours
    assert cache is not None and cache.is_finished
    assert cached_token_count(str(tmp_path / "cache/train")) == meta["tokens"]
    seqs = asyncio.run(TokenSeqDataset(cache, 16).get_batch([0, 1]))
    _, data = _arrays(str(tmp_path / "cache/train"))["input_ids"]
    np.testing.assert_array_equal(np.concatenate(seqs), data[:32])


def test_same_tokens_as_levanter_batch_tokenizer_with_normalizer_and_type_ids(corpus, tmp_path):
    """A tokenizer with a Replace normalizer (long-string split) and a template that sets type ids."""
    from levanter.data.text import BatchTokenizer
    from tokenizers import normalizers, processors
    from transformers import AutoTokenizer

    texts = _texts(1, 40, max_words=3000)
    texts[3] = "z" * 25_000  # no whitespace to cut at
    tokenizer = build_fast_tokenizer(texts, 300, ("<s>", "</s>", "<pad>", "<unk>"))
    backend = tokenizer.backend_tokenizer
    backend.normalizer = normalizers.Replace("\t", " ")
    backend.post_processor = processors.TemplateProcessing(single="<s>:1 $A:1", special_tokens=[("<s>", 0)])
    tokenizer.save_pretrained(tmp_path / "tok")
    reference = BatchTokenizer(AutoTokenizer.from_pretrained(tmp_path / "tok"))
    assert reference._needs_long_sequence_workaround and not reference._need_to_add_bos

    fmt = cache_format(str(tmp_path / "tok"))
    assert fmt.spec.split_long_strings and fmt.spec.type_ids
    assert fmt == cache_format(str(tmp_path / "tok"), use_transformers=True)
    assert fmt.metadata == reference.metadata | {"tokenizer": str(tmp_path / "tok")}
    block = b"".join(json.dumps({"text": t}).encode() + b"\n" for t in texts)
    ours = encode_block(fmt.spec, block, "mem", 1)
    theirs = reference([{"text": t} for t in texts])
    np.testing.assert_array_equal(ours.lengths, [len(r["input_ids"]) for r in theirs])
    np.testing.assert_array_equal(ours.input_ids, np.concatenate([r["input_ids"] for r in theirs]))
    np.testing.assert_array_equal(ours.token_type_ids, np.concatenate([r["token_type_ids"] for r in theirs]))


def _straight_build(corpus_files, tokenizer, dest) -> dict:
    return build_cache(corpus_files, dest, tokenizer, workers=1)


def test_resume_after_kill_continues_after_the_last_finished_file(corpus, tmp_path):
    """SIGKILL a build after its first file is committed; the rerun resumes there and ends identical."""
    texts = _texts(2, 6000, max_words=120)
    files = []
    for i in range(4):
        path = tmp_path / "docs" / f"f{i}.jsonl.gz"
        write_jsonl_shard(str(path), [{"text": t} for t in texts[i::4]])
        files.append(str(path))
    split = str(tmp_path / "killed/train")
    script = (
        "import sys, json; from marin_assets.processing.tokenize.cache_writer import build_cache; "
        "build_cache(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], workers=1, block_bytes=16384, flush_tokens=5000)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(files), split, corpus["tokenizer"]], cwd=REPO, start_new_session=True
    )
    ledger = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            try:
                ledger = read_cache_ledger(split)
            except json.JSONDecodeError:
                ledger = None
            if ledger and ledger["finished_shards"]:
                break
            time.sleep(0.005)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert ledger and 1 <= len(ledger["finished_shards"]) < 4 and not ledger["is_finished"], ledger
    committed = ledger["total_num_rows"]

    resumed = build_cache(files, split, corpus["tokenizer"], workers=2)
    assert resumed["finished"] and resumed["resumed_shards"] >= 1
    assert read_cache_ledger(split)["total_num_rows"] == 6000 > committed
    fresh = _straight_build(files, corpus["tokenizer"], str(tmp_path / "fresh/train"))
    assert fresh["tokens"] == resumed["tokens"]
    _assert_same_cache(split, str(tmp_path / "fresh/train"))


def test_other_tokenizer_or_files_rebuild_instead_of_resuming(corpus, tmp_path):
    split = str(tmp_path / "c/train")
    first = build_cache(corpus["files"][:2], split, corpus["tokenizer"], workers=1)
    again = build_cache(corpus["files"][:2], split, corpus["tokenizer"], workers=1)
    assert again["resumed_shards"] == 2 and again["tokens"] == first["tokens"]
    more = build_cache(corpus["files"], split, corpus["tokenizer"], workers=1)
    assert more["resumed_shards"] == 0 and more["documents"] == 900


def test_bad_record_names_file_and_line_and_leaves_cache_unfinished(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "fine too"}\n{"text": broken\n')
    with pytest.raises(ValueError, match=rf"{bad}:3"):
        build_cache([corpus["files"][0], str(bad)], str(tmp_path / "c/train"), corpus["tokenizer"], workers=2)
    ledger = read_cache_ledger(str(tmp_path / "c/train"))
    assert ledger["finished_shards"] == shard_names([corpus["files"][0], str(bad)])[:1] and not ledger["is_finished"]
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text('{"body": "x"}\n')
    with pytest.raises(ValueError, match=rf"{no_text}:1: no string field 'text'"):
        build_cache([str(no_text)], str(tmp_path / "d/train"), corpus["tokenizer"], workers=1)


def test_cache_on_gcs_is_read_by_levanter(corpus, gcs_server, gcs_prefix, monkeypatch, tmp_path):
    """Documents and cache on gs:// (fake-gcs-server); Levanter's reader opens the cache there."""
    import fsspec

    from marin_assets.processing.tokenize import cache_writer

    monkeypatch.setattr(cache_writer, "SMALL_INPUT_BYTES", 0)  # the process pool reads from gs:// too
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", gcs_server.url)
    monkeypatch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "anonymous")
    fs = fsspec.filesystem("gs")
    remote_files = []
    for path in corpus["files"]:
        remote = f"{gcs_prefix}/docs/{os.path.basename(path)}"
        fs.put_file(path, remote)
        remote_files.append(remote)
    remote_split = f"{gcs_prefix}/cache/train"
    meta = build_cache(remote_files, remote_split, corpus["tokenizer"], workers=2)
    assert meta["finished"] and meta["documents"] == 900
    assert fs.exists(f"{remote_split}/input_ids/data/zarr.json")
    local = build_cache(corpus["files"], str(tmp_path / "local/train"), corpus["tokenizer"], workers=1)
    assert local["tokens"] == meta["tokens"]
    _assert_same_cache(remote_split, str(tmp_path / "local/train"))


def test_writer_choice_does_not_change_the_step_version():
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.defaults import default_tokenize

    marin = default_tokenize("docs", "/data/docs", "/data/tok")
    levanter = default_tokenize("docs", "/data/docs", "/data/tok", writer="levanter")
    assert marin.config.writer == "marin" and levanter.config.writer == "levanter"
    paths = [StepGraph([step], "/prefix").resolved(step).output_path for step in (marin, levanter)]
    assert paths[0] == paths[1]
