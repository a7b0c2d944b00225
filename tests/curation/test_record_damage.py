"""Per-record damage never fails a drop (issue 30.1, 30.10): each kind is quarantined alone -- with
file, record id, line or byte offset and reason -- and the good records of the same file are kept.
WARC files are written with warcio (another writer than FastWARC, which reads them). Fast."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from marin_assets.core.io import list_files
from marin_assets.transform.raw.process import RawConfig, run_raw

PAGE = b"<html><body><p>A plain page body, long enough to be a document of its own.</p></body></html>"
LIES = {
    "gzip": [("Content-Encoding", "gzip")],
    "deflate": [("Content-Encoding", "deflate")],
    "br": [("Content-Encoding", "br")],
    "unknown": [("Content-Encoding", "x-made-up")],
    "chunked-plain": [("Transfer-Encoding", "chunked")],
}


def _write_drop(drop_dir: Path, files: dict[str, bytes]) -> None:
    drop_dir.mkdir(parents=True)
    entries = []
    for name, data in files.items():
        (drop_dir / name).write_bytes(data)
        entries.append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    (drop_dir / "manifest.json").write_text(json.dumps({"drop_id": drop_dir.name, "files": entries}))


def _run(tmp_path: Path, files: dict[str, bytes]) -> tuple[dict, list[dict], list[dict]]:
    _write_drop(tmp_path / "landing" / "web" / "d1", files)
    out = tmp_path / "out"
    meta = run_raw(RawConfig(str(tmp_path / "landing" / "web"), "d1", str(out)))
    docs = []
    for shard in list_files(str(out / "docs"), ".jsonl.gz"):
        # Valid JSON only: NaN / Infinity as bare tokens would be refused here.
        for line in gzip.decompress(Path(shard).read_bytes()).decode().splitlines():
            docs.append(json.loads(line, parse_constant=lambda token: pytest.fail(f"bare {token} in output")))
    quarantine = [
        json.loads(line)
        for f in list_files(str(out / "quarantine"), ".jsonl")
        for line in Path(f).read_text().splitlines()
    ]
    return meta, docs, quarantine


def _response(writer: WARCWriter, name: str, headers: list[tuple[str, str]], payload: bytes) -> None:
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), *headers], protocol="HTTP/1.1")
    record = writer.create_warc_record(
        f"http://example.org/{name}", "response", payload=io.BytesIO(payload), http_headers=http
    )
    writer.write_record(record)


def _raw_record(block: bytes, record_id: str, lf_only: bool = False) -> bytes:
    """A WARC response record written by hand (warcio refuses both kinds of damage below)."""
    header = (
        f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: {record_id}\r\nWARC-Target-URI: http://example.org/x\r\n"
        f"WARC-Date: 2024-01-01T00:00:00Z\r\nContent-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(block)}\r\n\r\n"
    )
    if lf_only:
        header = header.replace("\r\n", "\n")
    return header.encode() + block + (b"\n\n" if lf_only else b"\r\n\r\n")


@pytest.mark.parametrize("compressed", [False, True], ids=["warc", "warc.gz"])
def test_warc_payloads_whose_headers_lie_are_quarantined_alone(tmp_path, compressed):
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=compressed)
    _response(writer, "good-first", [], PAGE)
    for kind, headers in LIES.items():
        _response(writer, kind, headers, PAGE)
    _response(writer, "chunked-bad-hex", [("Transfer-Encoding", "chunked")], b"zz\r\n" + PAGE + b"\r\n0\r\n\r\n")
    _response(writer, "good-last", [], PAGE)
    name = "crawl.warc.gz" if compressed else "crawl.warc"
    meta, docs, quarantine = _run(tmp_path, {name: buf.getvalue()})
    assert sorted(d["metadata"]["url"] for d in docs) == [
        "http://example.org/good-first",
        "http://example.org/good-last",
    ]
    bad = [q for q in quarantine if q["reason"] == "bad_http_payload"]
    assert len(bad) == len(LIES) + 1
    for entry in bad:
        assert entry["file"] == name and entry["id"].startswith("<urn:uuid:")
        assert isinstance(entry["line"], int) and 2 <= entry["line"] <= 7 and isinstance(entry["offset"], int)
    details = " ".join(q["detail"] for q in bad)
    assert "Content-Encoding: gzip" in details and "Transfer-Encoding: chunked" in details
    assert "x-made-up" in details


def test_http_payload_without_status_line_and_lf_only_record(tmp_path):
    good = _raw_record(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><p>first good page</p></html>", "<g1>")
    lf = _raw_record(b"HTTP/1.1 200 OK\nContent-Type: text/html\n\n<html><p>lf only</p></html>", "<lf>", True)
    no_status = _raw_record(b"<html><p>no http status line</p></html>", "<nostatus>")
    last = _raw_record(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html><p>last good page</p></html>", "<g2>")
    meta, docs, quarantine = _run(tmp_path, {"mixed.warc": good + lf + no_status + last})
    assert [d["id"] for d in docs] == ["<g1>", "<g2>"]
    by_id = {q["id"]: q for q in quarantine}
    assert by_id["<lf>"]["reason"] == "corrupt_warc" and by_id["<lf>"]["line"] == 2
    assert by_id["<lf>"]["offset"] == len(good) and "LF" in by_id["<lf>"]["detail"]
    assert by_id["<nostatus>"]["reason"] == "bad_http_payload" and by_id["<nostatus>"]["line"] == 3
    assert by_id["<nostatus>"]["offset"] == len(good) + len(lf) and "no status line" in by_id["<nostatus>"]["detail"]


def test_json_lines_smalls_keep_every_good_record(tmp_path):
    line = lambda i, text="some text": json.dumps({"id": f"r{i}", "text": text})  # noqa: E731
    files = {
        # NaN / Infinity: Python's json extension; read, then written as text (valid JSON).
        "a_nan.jsonl": (b'{"id": "n1", "text": "has a score", "score": NaN, "m": {"hi": Infinity, "lo": -Infinity}}\n'),
        # Concatenated files: a UTF-8 BOM at the start of a middle line.
        "b_bom.jsonl": (line(1) + "\n").encode() + b"\xef\xbb\xbf" + (line(2) + "\n" + line(3) + "\n").encode(),
        # Lone CR line ends (old Mac): three records, not one.
        "c_cr.jsonl": "\r".join(line(i) for i in range(4, 7)).encode() + b"\r",
        # Zero-width characters only: no document.
        "d_zero_width.jsonl": (line(7, "\u200b\u200c\u200d\u2060\ufeff") + "\n" + line(8) + "\n").encode(),
    }
    meta, docs, quarantine = _run(tmp_path, files)
    assert sorted(d["id"] for d in docs) == ["n1", "r1", "r2", "r3", "r4", "r5", "r6", "r8"]
    nan = next(d for d in docs if d["id"] == "n1")["metadata"]
    assert nan["score"] == "NaN" and nan["m"] == {"hi": "Infinity", "lo": "-Infinity"}
    assert [(q["file"], q["line"], q["id"], q["reason"]) for q in quarantine] == [
        ("d_zero_width.jsonl", 1, "r7", "empty_text")
    ]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom_is_detected(tmp_path, encoding):
    bom = b"\xff\xfe" if encoding == "utf-16-le" else b"\xfe\xff"
    text = "".join(
        json.dumps({"id": f"u{i}", "text": f"héllo wörld {i} ✓"}, ensure_ascii=False) + "\n" for i in range(3)
    )
    data = bom + text.encode(encoding)
    meta, docs, quarantine = _run(tmp_path, {"utf16.jsonl": data, "utf16.jsonl.gz": gzip.compress(data)})
    assert sorted(d["text"] for d in docs) == sorted([f"héllo wörld {i} ✓" for i in range(3)] * 2)
    assert not quarantine


def test_parquet_damage_inside_one_row_group_keeps_the_others(tmp_path):
    sink = pa.BufferOutputStream()
    table = pa.table({"id": [f"p{i}" for i in range(30)], "text": [f"row {i} " * 20 for i in range(30)]})
    pq.write_table(table, sink, row_group_size=10, compression="none", use_dictionary=False)
    data = bytearray(sink.getvalue().to_pybytes())
    meta = pq.ParquetFile(io.BytesIO(bytes(data))).metadata
    column = meta.row_group(1).column(1)  # the text column of the middle row group
    start = column.data_page_offset
    data[start : start + 12] = b"\xff" * 12  # its page header: unreadable
    meta_out, docs, quarantine = _run(tmp_path, {"t.parquet": bytes(data)})
    ids = sorted(int(d["id"][1:]) for d in docs)
    assert ids == [*range(10), *range(20, 30)]
    bad = [q for q in quarantine if q["reason"] == "bad_parquet"]
    assert len(bad) == 1 and "row group 1 (rows 11-20)" in bad[0]["detail"] and bad[0]["file"] == "t.parquet"


def test_raw_output_has_no_bare_nan_from_parquet(tmp_path):
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["x y", "z w"], "score": [float("nan"), float("inf")]}), sink)
    meta, docs, quarantine = _run(tmp_path, {"s.parquet": sink.getvalue().to_pybytes()})
    assert [d["metadata"]["score"] for d in docs] == ["NaN", "Infinity"]
    assert os.path.exists(tmp_path / "out" / "provenance.json") and not quarantine


def test_lone_cr_lines_across_read_chunks(tmp_path):
    """A file bigger than one read chunk, lone CR line ends only, then CRLF and LF mixed in."""
    lines = [json.dumps({"id": f"c{i}", "text": f"line {i} " + "x" * 500}) for i in range(3000)]
    data = "\r".join(lines[:2500]).encode() + b"\r" + "\r\n".join(lines[2500:2800]).encode() + b"\r\n"
    data += "\n".join(lines[2800:]).encode() + b"\n"
    meta, docs, quarantine = _run(tmp_path, {"mac.jsonl": data})
    assert len(docs) == 3000 and not quarantine
    assert sorted(d["metadata"]["landing_line"] for d in docs) == list(range(1, 3001))


def test_nan_text_or_id_is_no_document_and_real_encodings_still_decode(tmp_path):
    files = {
        "a.jsonl": b'{"id": "t1", "text": NaN}\n{"id": Infinity, "text": "has no id"}\n{"id": "ok", "text": "fine"}\n'
    }
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False)
    _response(writer, "gzipped", [("Content-Encoding", "gzip")], gzip.compress(PAGE))
    files["b.warc"] = buf.getvalue()
    meta, docs, quarantine = _run(tmp_path, files)
    assert sorted(d["id"] for d in docs if d["metadata"]["landing_file"] == "a.jsonl") == ["ok"]
    assert sorted(q["reason"] for q in quarantine) == ["missing_id", "text_not_string"]
    (page,) = [d for d in docs if d["metadata"]["landing_file"] == "b.warc"]
    assert "A plain page body" in page["text"]
