"""Bad input matrix for the raw stage: each bad piece is quarantined and counted, good records survive."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from marin_assets.core.io import list_files, read_jsonl_gz
from marin_assets.transform.raw.process import RawConfig, run_raw


def _line(i, prefix="good"):
    return json.dumps({"id": f"{prefix}-{i}", "text": f"<p>document {prefix} {i}</p>", "metadata": {"url": f"u{i}"}})


def _write_drop(drop_dir, files: dict[str, bytes]):
    os.makedirs(drop_dir)
    entries = []
    for name, data in files.items():
        with open(os.path.join(drop_dir, name), "wb") as f:
            f.write(data)
        entries.append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    with open(os.path.join(drop_dir, "manifest.json"), "w") as f:
        json.dump({"drop_id": os.path.basename(drop_dir), "files": entries}, f)


def _quarantine(out: str) -> list[dict]:
    return [
        json.loads(line) for f in list_files(f"{out}/quarantine", ".jsonl") for line in Path(f).read_text().splitlines()
    ]


def _parquet(table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


@pytest.fixture
def bad_drop(tmp_path):
    rng = random.Random(0)
    good_gz = gzip.compress("\n".join(_line(i, "gz") for i in range(5)).encode() + b"\n")
    full = gzip.compress("\n".join(_line(i, "trunc") for i in range(2000)).encode() + b"\n")
    truncated = full[: len(full) // 2]
    files = {
        "a_good.jsonl.gz": good_gz,
        "b_truncated.jsonl.gz": truncated,
        "c_utf8.jsonl": (_line(0, "utf8") + "\n").encode()
        + b'{"id": "bad", "text": "\xff\xfe broken"}\n'
        + (_line(1, "utf8") + "\n").encode(),
        "d_notjson.jsonl": (_line(0, "nj") + "\nthis is not json\n[1, 2]\n" + _line(1, "nj") + "\n").encode(),
        "e_missing.jsonl": (
            json.dumps({"text": "no id"})
            + "\n"
            + json.dumps({"id": "no-text"})
            + "\n"
            + json.dumps({"id": "num-text", "text": 5})
            + "\n"
            + json.dumps({"id": "empty", "text": "  "})
            + "\n"
            + _line(0, "ms")
            + "\n"
        ).encode(),
        "f_big.jsonl": (
            json.dumps({"id": "huge", "text": "x" * (50 * 1024 * 1024)}) + "\n" + _line(0, "big") + "\n"
        ).encode(),
        "g_empty.jsonl": b"",
        # gzip magic and header, then garbage: a corrupt stream (content is sniffed, not the name).
        "h_garbage.jsonl.gz": b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"
        + bytes(rng.randrange(256) for _ in range(5000)),
        "i_garbage.jsonl": bytes(rng.randrange(256) for _ in range(5000)),
        "j_wrong_schema.parquet": _parquet(pa.table({"doc": ["a", "b"], "body": ["x", "y"]})),
        "k_good.parquet": _parquet(pa.table({"id": ["pq-0", "pq-1", None], "text": ["<p>a</p>", "<p>b</p>", "c"]})),
        "l_notes.txt": b"hello",
    }
    landing = tmp_path / "landing" / "src"
    _write_drop(str(landing / "drop-bad"), files)
    return str(landing), str(tmp_path / "out")


def test_bad_input_matrix(bad_drop):
    landing, out = bad_drop
    meta = run_raw(RawConfig(landing_dir=landing, drop_id="drop-bad", output_path=out, max_doc_bytes=40_000_000))
    docs = [r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)]
    ids = {d["id"] for d in docs}
    # Every good record survives, whatever else its file holds.
    expected = {f"gz-{i}" for i in range(5)} | {"utf8-0", "utf8-1", "nj-0", "nj-1", "ms-0", "big-0", "pq-0", "pq-1"}
    assert expected <= ids
    trunc = {i for i in ids if i.startswith("trunc-")}
    assert len(trunc) > 100 and all(f"trunc-{i}" in ids for i in range(len(trunc)))  # a prefix, no holes
    assert not ids & {"bad", "no-text", "num-text", "empty", "huge"}
    reasons = meta["quarantine_reasons"]
    for code in (
        "truncated_gzip",
        "invalid_utf8",
        "not_json",
        "not_an_object",
        "missing_id",
        "missing_text",
        "text_not_string",
        "empty_text",
        "too_large",
        "corrupt_gzip",
        "parquet_schema",
        "unsupported_format",
    ):
        assert reasons.get(code, 0) >= 1, (code, reasons)
    assert meta["empty_files"] == 1
    assert meta["documents_out"] == len(docs)
    # Quarantine records name the file and line.
    q = _quarantine(out)
    assert sum(meta["quarantine_reasons"].values()) == meta["quarantined"] >= len(q)
    utf8 = [r for r in q if r["reason"] == "invalid_utf8" and r["file"] == "c_utf8.jsonl"]
    assert utf8 and utf8[0]["line"] == 2
    big = [r for r in q if r["reason"] == "too_large"]
    assert big[0]["file"] == "f_big.jsonl" and big[0]["line"] == 1 and len(big[0]["sample"]) <= 200
    # Dolma shape.
    d = next(d for d in docs if d["id"] == "ms-0")
    assert set(d) >= {"id", "text", "source", "added", "metadata"} and d["source"] == "src"
    assert d["metadata"]["landing_file"] == "e_missing.jsonl" and d["metadata"]["landing_line"] == 5
    prov = json.loads(Path(f"{out}/provenance.json").read_text())
    assert prov["drop_id"] == "drop-bad" and len(prov["files"]) == 12


def test_rerun_overwrites_cleanly(bad_drop):
    landing, out = bad_drop
    first = run_raw(RawConfig(landing_dir=landing, drop_id="drop-bad", output_path=out, docs_per_shard=3))
    # A leftover of a crashed attempt must not survive a rerun.
    os.makedirs(f"{out}/docs", exist_ok=True)
    with open(f"{out}/docs/shard-99999-0000.jsonl.gz", "wb") as f:
        f.write(gzip.compress(b'{"id": "stale", "text": "x"}\n'))
    second = run_raw(RawConfig(landing_dir=landing, drop_id="drop-bad", output_path=out, docs_per_shard=3))
    assert first["documents_out"] == second["documents_out"]
    ids = [r["id"] for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)]
    assert "stale" not in ids and len(ids) == len(set(ids)) == second["documents_out"]


def test_invalid_drop_fails_with_reason(tmp_path):
    landing = tmp_path / "landing" / "src"
    (landing / "drop-x").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="drop-x.*incomplete"):
        run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-x", output_path=str(tmp_path / "o")))


def test_overlong_line_skipped_without_buffering(bad_drop):
    landing, out = bad_drop
    # With a 1 MB limit the 50 MB line is skipped as it streams in, never parsed.
    meta = run_raw(RawConfig(landing_dir=landing, drop_id="drop-bad", output_path=out, max_doc_bytes=1_000_000))
    assert meta["quarantine_reasons"].get("line_too_long", 0) >= 1
    q = _quarantine(out)
    long = [r for r in q if r["reason"] == "line_too_long" and r["file"] == "f_big.jsonl"]
    assert long and long[0]["line"] == 1
    ids = {r["id"] for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)}
    assert "big-0" in ids
