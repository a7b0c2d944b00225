"""Marin's ``DedupMode`` on ``dedupe`` and single files as inputs and decontamination sources."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from marin_assets.core.io import read_jsonl
from marin_assets.processing.classification.dedupe import DedupeConfig, DedupMode, NGramConfig, dedupe

PARA = "This paragraph is shared by the evaluation set and the training corpus, word for word."
DOCS = [
    {"id": "a", "text": f"first document opening line\n{PARA}"},
    {"id": "b", "text": "second document, nothing shared with anything else at all here"},
    {"id": "c", "text": f"first document opening line\n{PARA}"},  # exact copy of a
]


def _write(path: Path, records: list[dict], kind: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    if kind == "gzip":
        data = gzip.compress(data)
    elif kind == "zstd":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def _attrs(path: Path) -> dict[str, dict]:
    return {r["id"]: r["attributes"] for r in read_jsonl(str(path))}


def test_dedup_mode_has_marins_values_and_reads_them_as_strings():
    assert [m.value for m in DedupMode] == [
        "decontaminate", "deduplicate", "doc_deduplicate", "exact_doc_deduplicate", "train_test_overlap"
    ]  # fmt: skip
    assert DedupMode("train_test_overlap") is DedupMode.TRAIN_TEST_OVERLAP == "train_test_overlap"
    assert DedupeConfig("i", "o").workflow is DedupMode.DEDUPLICATE
    assert DedupeConfig("i", "o", decontaminate=True).workflow is DedupMode.DECONTAMINATE  # Marin's earlier flag
    assert DedupeConfig("i", "o", mode="decontaminate").workflow is DedupMode.DECONTAMINATE
    with pytest.raises(ValueError):
        dedupe(DedupeConfig("i", "o", mode="fuzzy"))


def test_single_zst_input_is_deduplicated_like_the_same_documents_in_a_folder(tmp_path):
    single = _write(tmp_path / "one/docs.jsonl.zst", DOCS, "zstd")
    _write(tmp_path / "folder/docs.jsonl.gz", DOCS, "gzip")
    meta = dedupe(DedupeConfig(str(single), str(tmp_path / "out-single")))
    dedupe(DedupeConfig(str(tmp_path / "folder"), str(tmp_path / "out-folder")))
    out = tmp_path / "out-single/docs.jsonl.zst"  # named as the input file, compressed as named
    assert out.read_bytes().startswith(b"\x28\xb5\x2f\xfd")
    assert _attrs(out) == _attrs(tmp_path / "out-folder/docs.jsonl.gz")
    assert _attrs(out)["c"]["fuzzy_duplicate_of"] == "a" and meta["mode"] == "deduplicate"


@pytest.mark.parametrize("mode", [DedupMode.DOC_DEDUPLICATE, DedupMode.EXACT_DOC_DEDUPLICATE])
def test_doc_deduplicate_marks_documents_whose_whole_text_occurred_before(tmp_path, mode):
    """``EXACT_DOC_DEDUPLICATE`` is Marin's later name of the same workflow (issue 38)."""
    single = _write(tmp_path / "in.jsonl.gz", DOCS, "gzip")
    meta = dedupe(DedupeConfig(str(single), str(tmp_path / "out"), mode=mode))
    attrs = _attrs(tmp_path / "out/in.jsonl.gz")
    assert attrs["a"]["duplicate_text"] == [] == attrs["b"]["duplicate_text"]
    assert attrs["c"]["duplicate_text"] == [[0, len(DOCS[2]["text"]), 1.0]] and attrs["c"]["fuzzy_duplicate"] == 1
    assert meta["document_duplicates"] == 1


@pytest.mark.parametrize("source_kind", ["json.gz file", "jsonl.zst file", "folder of jsonl.zst", "list"])
def test_decontaminate_source_may_be_a_single_file_a_folder_of_any_suffix_or_a_list(tmp_path, source_kind):
    evals = [{"id": "e", "text": f"question header\n{PARA}"}]
    gz = _write(tmp_path / "src/eval.json.gz", evals, "gzip")
    zst = _write(tmp_path / "zfolder/sub/eval.jsonl.zst", evals, "zstd")
    other = _write(tmp_path / "other.jsonl", [{"id": "o", "text": "unrelated"}], "none")
    source = {
        "json.gz file": str(gz),
        "jsonl.zst file": str(zst),
        "folder of jsonl.zst": str(tmp_path / "zfolder"),
        "list": [str(other), str(gz)],
    }[source_kind]
    train = _write(tmp_path / "train.jsonl.zst", DOCS, "zstd")
    meta = dedupe(
        DedupeConfig(str(train), str(tmp_path / "out"), mode=DedupMode.DECONTAMINATE, decontaminate_source=source)
    )
    attrs = _attrs(tmp_path / "out/train.jsonl.zst")
    start = DOCS[0]["text"].index(PARA)
    assert attrs["a"]["duplicate_text"] == [[start, start + len(PARA), 1.0]] == attrs["c"]["duplicate_text"]
    assert attrs["b"]["duplicate_text"] == [] and meta["mode"] == "decontaminate"


def test_marins_earlier_decontaminate_flag_takes_a_single_file_path_too(tmp_path):
    evals = _write(tmp_path / "eval.json.gz", [{"id": "e", "text": f"question header\n{PARA}"}], "gzip")
    train = _write(tmp_path / "corpus/part.jsonl.gz", DOCS, "gzip")
    dedupe(
        DedupeConfig(str(tmp_path / "corpus"), str(tmp_path / "out"), decontaminate=True, decontaminate_path=str(evals))
    )
    attrs = _attrs(tmp_path / "out/part.jsonl.gz")
    assert attrs["a"]["duplicate_text"] and attrs["b"]["duplicate_text"] == [] and train.exists()


def test_train_test_overlap_needs_a_source_and_ngrams_as_in_marin(tmp_path):
    train = _write(tmp_path / "train.jsonl.gz", DOCS, "gzip")
    with pytest.raises(ValueError, match="decontaminate_source is required in TRAIN_TEST_OVERLAP mode"):
        dedupe(DedupeConfig(str(train), str(tmp_path / "o1"), mode=DedupMode.TRAIN_TEST_OVERLAP, ngram=NGramConfig()))
    with pytest.raises(ValueError, match="ngram config is required in TRAIN_TEST_OVERLAP mode"):
        dedupe(
            DedupeConfig(str(train), str(tmp_path / "o2"), mode="train_test_overlap", decontaminate_source=str(train))
        )
    with pytest.raises(FileNotFoundError, match="no document files"):
        dedupe(
            DedupeConfig(
                str(train), str(tmp_path / "o3"), mode="decontaminate", decontaminate_source=str(tmp_path / "none")
            )
        )
