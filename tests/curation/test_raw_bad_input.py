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


# ------------------------------------------------------------------------------------------
# Bad inputs real crawls produce (issue 17): each test names exactly what is kept and what goes.


def _warc_record(key: str, html: str, length_factor: float = 1.0, record_type: str = "response") -> bytes:
    """One WARC response record (plain bytes); ``length_factor`` makes its Content-Length lie."""
    body = html.encode()
    block = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    length = int(len(block) * length_factor)
    head = (
        "WARC/1.1\r\n"
        f"WARC-Type: {record_type}\r\n"
        f"WARC-Record-ID: <urn:uuid:{key}>\r\n"
        f"WARC-Target-URI: https://{key}.example/\r\n"
        "WARC-Date: 2024-05-01T00:00:00Z\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    return head.encode() + block + b"\r\n\r\n"


def _page(i: int) -> str:
    return f"<html><body><p>page {i} " + "words " * 200 + "</p></body></html>"


def _run_one(tmp_path, files: dict[str, bytes], **config) -> tuple[dict, dict[str, set[str]], list[dict]]:
    """(stage metadata, ids kept per landing file, quarantine rows) of one drop."""
    landing = tmp_path / "landing" / "src"
    _write_drop(str(landing / "drop-1"), files)
    out = str(tmp_path / "out")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out, **config))
    kept: dict[str, set[str]] = {name: set() for name in files}
    for doc in (r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)):
        kept[doc["metadata"]["landing_file"]].add(doc["id"])
        assert "WARC/1." not in doc["text"] and "WARC-Record-ID" not in doc["text"], doc["id"]
    return meta, kept, _quarantine(out)


@pytest.mark.parametrize("factor", [4.0, 0.5])
def test_warc_lying_content_length_quarantines_one_record(tmp_path, factor):
    """A record whose Content-Length says 4x or half its size: that record alone is quarantined,
    the reader resynchronises on the next WARC header and keeps every later good record -- in a
    plain WARC, a gzip-per-record WARC (Common Crawl's layout) and one zstd frame."""
    import zstandard

    records = [_warc_record(f"p{i}", _page(i), factor if i == 1 else 1.0) for i in range(6)]
    info = _warc_record("info", "software: test", record_type="warcinfo")
    files = {
        "plain.warc": info + b"".join(records),
        "per_record.warc.gz": b"".join(gzip.compress(r) for r in [info, *records]),
        "one_frame.warc.zst": zstandard.ZstdCompressor().compress(info + b"".join(records)),
    }
    meta, kept, rows = _run_one(tmp_path, files)
    good = {f"<urn:uuid:p{i}>" for i in (0, 2, 3, 4, 5)}
    assert kept == {name: good for name in files}
    assert meta["quarantine_reasons"] == {"corrupt_warc": 3}
    assert {(r["file"], r["line"], r["id"]) for r in rows} == {(name, 2, "<urn:uuid:p1>") for name in files}
    assert all("Content-Length" in r["detail"] for r in rows)
    assert meta["records_in"] == 15


def test_warc_lying_content_length_on_the_last_record(tmp_path):
    records = [_warc_record(f"p{i}", _page(i), 4.0 if i == 3 else 1.0) for i in range(4)]
    meta, kept, rows = _run_one(tmp_path, {"x.warc.gz": b"".join(gzip.compress(r) for r in records)})
    assert kept["x.warc.gz"] == {"<urn:uuid:p0>", "<urn:uuid:p1>", "<urn:uuid:p2>"}
    assert [(r["reason"], r["line"], r["id"]) for r in rows] == [("corrupt_warc", 4, "<urn:uuid:p3>")]


def test_warc_payload_holding_a_warc_header_line_is_one_record(tmp_path):
    """A page that quotes a WARC header (a page about WARC files) is read whole when its
    Content-Length is right: the boundary after it checks out, so no resynchronisation."""
    quoted = "<html><body><pre>\nWARC/1.0\r\nWARC-Type: response\r\nContent-Length: 5\r\n\r\n</pre></body></html>"
    records = [_warc_record("p0", _page(0)), _warc_record("quote", quoted), _warc_record("p2", _page(2))]
    landing = tmp_path / "landing" / "src"
    _write_drop(str(landing / "drop-1"), {"q.warc": b"".join(records)})
    out = str(tmp_path / "out")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    docs = {r["id"]: r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)}
    assert set(docs) == {"<urn:uuid:p0>", "<urn:uuid:quote>", "<urn:uuid:p2>"}
    assert "WARC-Type: response" in docs["<urn:uuid:quote>"]["text"]
    assert meta["quarantined"] == 0


def test_zstd_with_leading_skippable_frames_is_zstd(tmp_path):
    """RFC 8878 skippable frames (magic 0x184D2A50-0x184D2A5F) before the data frame, and
    between frames: the file is zstd, every record kept (JSON lines and WARC)."""
    import struct

    import zstandard

    def skippable(magic: int, payload: bytes) -> bytes:
        return struct.pack("<II", magic, len(payload)) + payload

    lines = "".join(_line(i, "zs") + "\n" for i in range(5)).encode()
    zc = zstandard.ZstdCompressor()
    warc = b"".join(_warc_record(f"w{i}", _page(i)) for i in range(3))
    files = {
        "a.jsonl.zst": skippable(0x184D2A50, b"seekable index") + zc.compress(lines[:200]) + zc.compress(lines[200:]),
        "b.jsonl.zst": skippable(0x184D2A5F, b"x" * 10_000) + skippable(0x184D2A55, b"") + zc.compress(lines),
        "c.warc.zst": skippable(0x184D2A5A, b"meta") + zc.compress(warc) + skippable(0x184D2A5A, b"end"),
    }
    meta, kept, rows = _run_one(tmp_path, files)
    assert kept["a.jsonl.zst"] == kept["b.jsonl.zst"] == {f"zs-{i}" for i in range(5)}
    assert kept["c.warc.zst"] == {f"<urn:uuid:w{i}>" for i in range(3)}
    assert rows == [] and meta["formats"] == {"jsonl.zst": 2, "warc.zst": 1}


def test_parquet_binary_text_column_decoded_per_row(tmp_path):
    """A text column stored as binary is decoded as UTF-8; only the row that is not valid UTF-8 goes."""
    table = pa.table(
        {
            "id": ["b-0", "b-1", "b-2", "b-3"],
            "text": pa.array(
                ["caf\u00e9 one".encode(), b"bad \xff\xfe", b"three", "\u6f22\u5b57".encode()], pa.binary()
            ),
        }
    )
    large = pa.table({"id": ["l-0", "l-1"], "text": pa.array([b"large one", b"\xc3"], pa.large_binary())})
    meta, kept, rows = _run_one(tmp_path, {"b.parquet": _parquet(table), "l.parquet": _parquet(large)})
    assert kept == {"b.parquet": {"b-0", "b-2", "b-3"}, "l.parquet": {"l-0"}}
    assert sorted((r["file"], r["line"], r["reason"]) for r in rows) == [
        ("b.parquet", 2, "invalid_utf8"),
        ("l.parquet", 2, "invalid_utf8"),
    ]
    assert meta["quarantine_reasons"] == {"invalid_utf8": 2}


def test_utf8_bom_at_the_start_of_jsonl_keeps_the_first_record(tmp_path):
    bom = b"\xef\xbb\xbf"
    lines = "".join(_line(i, "bom") + "\n" for i in range(3)).encode()
    files = {"plain.jsonl": bom + lines, "packed.jsonl.gz": gzip.compress(bom + lines), "noext": bom + lines}
    meta, kept, rows = _run_one(tmp_path, files)
    assert kept == {name: {"bom-0", "bom-1", "bom-2"} for name in files}
    assert rows == [] and meta["formats"] == {"jsonl": 2, "jsonl.gz": 1}


def test_warc_garbage_between_records_and_loose_separators(tmp_path):
    """Bytes that are no WARC header between two records are quarantined once and skipped to the
    next header; a record closed by a bare LF instead of CRLF CRLF is still whole (its length is
    right): nothing good is lost."""
    r0, r1, r2, r3 = (_warc_record(f"p{i}", _page(i)) for i in range(4))
    loose = r1[:-4] + b"\n"  # a writer that ends records with one LF
    data = r0 + b"this is not a WARC header\r\n\r\nnor this\r\n" + loose + r2 + r3
    meta, kept, rows = _run_one(tmp_path, {"g.warc": data, "g.warc.gz": gzip.compress(data)})
    every = {f"<urn:uuid:p{i}>" for i in range(4)}
    assert kept == {"g.warc": every, "g.warc.gz": every}
    assert sorted((r["file"], r["reason"]) for r in rows) == [("g.warc", "corrupt_warc"), ("g.warc.gz", "corrupt_warc")]
    assert all("no WARC record header" in r["detail"] and "reading on" in r["detail"] for r in rows)


def test_warc_gz_with_zero_padding_after_members(tmp_path):
    """Block-aligned writers pad a gzip file with zero bytes: padding between members is skipped
    silently; padding after the last member keeps every record and is reported where it starts."""
    members = [gzip.compress(_warc_record(f"p{i}", _page(i))) for i in range(3)]
    between = members[0] + b"\x00" * 100 + members[1] + members[2]
    meta, kept, rows = _run_one(tmp_path, {"pad.warc.gz": between + b"\x00" * (200 << 10)})
    assert kept["pad.warc.gz"] == {f"<urn:uuid:p{i}>" for i in range(3)}
    assert [(r["reason"], r["offset"]) for r in rows] == [("corrupt_warc", len(between))]
    assert "zero bytes after the end of the gzip stream" in rows[0]["detail"]
