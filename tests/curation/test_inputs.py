"""Raw inputs: WARC / WET, JSON lines (plain, gzip, zstd), parquet, saved HF datasets -- format
sniffed from content, provenance on every record, and the sample WARC drop through raw -> text."""

from __future__ import annotations

import gzip
import hashlib
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from marin_assets.core.io import list_files, read_jsonl_gz
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.experiments.sample_data import SampleConfig, ground_truth_path, write_drop
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_assets.transform.raw.warc_writer import WarcPage, encode_warc_gz, warc_record_id
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md


def write_drop_files(drop_dir: str, files: dict[str, bytes]) -> None:
    """Data files + a correct manifest (written last)."""
    entries = []
    for name, data in files.items():
        path = os.path.join(drop_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        entries.append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    with open(os.path.join(drop_dir, "manifest.json"), "w") as handle:
        json.dump({"drop_id": os.path.basename(drop_dir), "files": entries}, handle)


def docs_of(out: str) -> dict[str, dict]:
    return {r["id"]: r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)}


def quarantine_of(out: str) -> list[dict]:
    rows = []
    for f in list_files(f"{out}/quarantine", ".jsonl"):
        with open(f) as handle:
            rows.extend(json.loads(line) for line in handle if line.strip())
    return rows


def _jsonl(prefix: str, n: int) -> bytes:
    return "".join(
        json.dumps({"id": f"{prefix}-{i}", "text": f"<p>{prefix} {i}</p>"}) + "\n" for i in range(n)
    ).encode()


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def test_warc_records_keep_provenance(tmp_path):
    pages = [
        WarcPage("a", "https://a.example/1", "2024-03-01T10:00:00Z", "<html><body><p>Page one text.</p></body></html>"),
        WarcPage("img", "https://a.example/logo.png", "2024-03-01T10:00:01Z", "PNG", content_type="image/png"),
        WarcPage("moved", "https://a.example/old", "2024-03-01T10:00:02Z", "", status=301),
        WarcPage("b", "https://b.example/2", "2024-03-02T11:00:00Z", "<html><body><p>Page two.</p></body></html>"),
    ]
    wet = [
        WarcPage(
            "t", "https://c.example/3", "2024-03-03T00:00:00Z", "Plain text\n\nwith two paragraphs.", plain_text=True
        )
    ]
    landing = tmp_path / "landing" / "crawl"
    write_drop_files(
        str(landing / "drop-001"),
        {"cc.warc.gz": encode_warc_gz(pages, "cc.warc.gz"), "cc.warc.wet.gz": encode_warc_gz(wet, "cc.wet")},
    )
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-001", output_path=out))
    docs = docs_of(out)
    assert set(docs) == {warc_record_id("a"), warc_record_id("b"), warc_record_id("t")}
    assert meta["records_in"] == 5 and meta["records_skipped"] == 2 and meta["documents_out"] == 3
    assert meta["formats"] == {"warc.gz": 2}
    b = docs[warc_record_id("b")]
    md = b["metadata"]
    assert md["url"] == "https://b.example/2" and md["warc_date"] == "2024-03-02T11:00:00Z"
    assert md["warc_record_id"] == warc_record_id("b") and md["landing_file"] == "cc.warc.gz"
    assert md["landing_line"] == 4 and md["warc_offset"] > docs[warc_record_id("a")]["metadata"]["warc_offset"] > 0
    assert b["created"] == "2024-03-02T11:00:00Z" and "Page two." in b["text"]
    # WET conversions are already text: the text stage passes them through, HTML is extracted.
    text_out = str(tmp_path / "text")
    text_meta = html_to_md(SimpleHtmlToMdConfig(out, text_out, "resiliparse", CURATION_EXTRACTION))
    texts = docs_of(text_out)
    assert texts[warc_record_id("t")]["text"] == "Plain text\n\nwith two paragraphs."
    assert texts[warc_record_id("a")]["text"] == "Page one text."
    assert text_meta["plain_text_passthrough"] == 1


def test_sample_warc_drop_next_to_jsonl_drops(tmp_path):
    prefix = str(tmp_path)
    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=30), "web")
    manifest = write_drop(prefix, "drop-002", SampleConfig(docs_per_drop=30), "web", file_format="warc")
    assert [f["path"] for f in manifest["files"]] == ["part-00000.warc.gz", "part-00001.warc.gz"]
    with open(f"{prefix}/landing/web/drop-002/part-00000.warc.gz", "rb") as handle:
        assert gzip.decompress(handle.read())[:5] == b"WARC/"
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=f"{prefix}/landing/web", drop_id="drop-002", output_path=out))
    with open(ground_truth_path(prefix, "web", "drop-002")) as handle:
        truth = json.load(handle)
    docs = docs_of(out)
    assert set(docs) == set(truth["labels"]) and meta["documents_out"] == 30
    assert all(d["metadata"]["warc_record_id"] == d["id"] and d["metadata"]["url"] for d in docs.values())
    assert {d["of"] for d in truth["exact_dups"] + truth["near_dups"]} <= set(docs)


def test_format_is_sniffed_not_taken_from_the_name(tmp_path):
    landing = tmp_path / "landing" / "src"
    zstd = zstandard.ZstdCompressor().compress
    files = {
        "a.jsonl": gzip.compress(_jsonl("gz-named-plain", 3)),  # gzip named .jsonl
        "b.jsonl.gz": _jsonl("plain-named-gz", 3),  # text named .jsonl.gz
        "c.jsonl.zst": zstd(_jsonl("zst", 3)),
        "d.jsonl": zstd(_jsonl("zst-named-plain", 2)),
        "e.json.gz": _parquet(pa.table({"id": ["pq-0", "pq-1"], "text": ["<p>x</p>", "<p>y</p>"]})),
        "f.parquet": b"just some words\nand another line\nthird\n",  # not parquet, not JSON
        "g.warc": encode_warc_gz([WarcPage("w", "https://w.example/", "2024-01-01T00:00:00Z", "<p>warc</p>")]),
        "h.jsonl.zst": zstd(_jsonl("cut", 20000))[:-50],  # truncated zstd (many blocks)
    }
    write_drop_files(str(landing / "drop-1"), files)
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    ids = set(docs_of(out))
    for prefix, n in (("gz-named-plain", 3), ("plain-named-gz", 3), ("zst", 3), ("zst-named-plain", 2)):
        assert {f"{prefix}-{i}" for i in range(n)} <= ids, prefix
    assert {"pq-0", "pq-1", warc_record_id("w")} <= ids
    assert len({i for i in ids if i.startswith("cut-")}) > 10000
    assert meta["quarantine_reasons"]["unsupported_format"] == 3  # every line of f.parquet counted
    assert meta["quarantine_reasons"]["truncated_zstd"] == 1
    assert set(meta["format_mismatches"]) == {"a.jsonl", "b.jsonl.gz", "d.jsonl", "e.json.gz", "f.parquet", "g.warc"}
    with open(f"{out}/provenance.json") as handle:
        formats = {f["file"]: f["format"] for f in json.load(handle)["files"]}
    assert formats["a.jsonl"] == "jsonl.gz" and formats["b.jsonl.gz"] == "jsonl" and formats["e.json.gz"] == "parquet"
    [unsupported] = [q for q in quarantine_of(out) if q["reason"] == "unsupported_format"]
    assert unsupported["file"] == "f.parquet" and "3 line(s)" in unsupported["detail"]


def test_saved_hf_datasets_in_a_drop(tmp_path):
    import datasets

    drop = tmp_path / "landing" / "hf" / "drop-1"
    datasets.Dataset.from_dict({"text": ["<p>alpha</p>", "<p>beta</p>"], "url": ["u1", "u2"]}).save_to_disk(
        str(drop / "plain")
    )
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"id": ["t-0", "t-1", "t-2"], "text": ["<p>a</p>", "<p>b</p>", ""]}),
            "test": datasets.Dataset.from_dict({"id": ["s-0"], "text": ["<p>c</p>"]}),
        }
    ).save_to_disk(str(drop / "splits"))
    files = {}
    for directory, _, names in os.walk(drop):
        for name in names:
            full = os.path.join(directory, name)
            with open(full, "rb") as handle:
                files[os.path.relpath(full, drop)] = handle.read()
    write_drop_files(str(drop), files)
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(drop.parent), drop_id="drop-1", output_path=out))
    docs = docs_of(out)
    assert set(docs) == {"drop-1/plain/data/1", "drop-1/plain/data/2", "t-0", "t-1", "s-0"}
    assert meta["formats"] == {"hf-dataset": 2} and meta["quarantine_reasons"] == {"empty_text": 1}
    t1 = docs["t-1"]["metadata"]
    assert t1["hf_split"] == "train" and t1["hf_row"] == 2 and t1["landing_file"] == "splits"
    assert docs["drop-1/plain/data/2"]["text"] == "<p>beta</p>"


@pytest.mark.parametrize("compress", [False, True])
def test_lone_surrogate_quarantined_per_record(tmp_path, compress):
    lines = [
        json.dumps({"id": "ok-1", "text": "<p>fine</p>"}),
        '{"id": "bad", "text": "broken \\ud800 text"}',
        '{"id": "bad-meta", "text": "fine", "metadata": {"title": "\\udfff"}}',
        json.dumps({"id": "ok-2", "text": "<p>also fine \u00e9</p>"}),
    ]
    data = ("\n".join(lines) + "\n").encode()
    name = "part.jsonl.gz" if compress else "part.jsonl"
    landing = tmp_path / "landing" / "src"
    write_drop_files(str(landing / "drop-1"), {name: gzip.compress(data) if compress else data})
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    assert set(docs_of(out)) == {"ok-1", "ok-2"}
    assert meta["quarantine_reasons"] == {"unencodable_text": 2}
    rows = quarantine_of(out)
    assert [(r["file"], r["line"], r["id"], r["stage"]) for r in rows] == [
        (name, 2, "bad", "raw"),
        (name, 3, "bad-meta", "raw"),
    ]
    assert f"{name} line 2" in rows[0]["detail"]
    # The downstream stage reads what raw wrote without trouble.
    assert (
        html_to_md(SimpleHtmlToMdConfig(out, str(tmp_path / "text"), "resiliparse", CURATION_EXTRACTION))[
            "documents_out"
        ]
        == 2
    )


def test_corrupt_warc_keeps_records_before_the_damage(tmp_path):
    pages = [WarcPage(f"p{i}", f"https://p.example/{i}", "2024-01-01T00:00:00Z", f"<p>page {i}</p>") for i in range(3)]
    data = encode_warc_gz(pages, "x.warc.gz")
    first_two = encode_warc_gz(pages[:2], "x.warc.gz")
    damaged = first_two + b"\x1f\x8b\x08\x00" + b"garbage" * 40 + data[len(first_two) :]
    landing = tmp_path / "landing" / "src"
    write_drop_files(str(landing / "drop-1"), {"x.warc.gz": damaged})
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    assert set(docs_of(out)) == {warc_record_id("p0"), warc_record_id("p1")}
    assert meta["quarantine_reasons"] == {"corrupt_warc": 1}
    [row] = quarantine_of(out)
    assert row["file"] == "x.warc.gz" and "after record 2" in row["detail"]


def test_parquet_and_jsonl_keep_every_field_and_name_columns(tmp_path):
    """A parquet without an id column (a HF dataset's parquet export) gets ids; columns named
    otherwise are read with text_key / id_key; url, date and other fields stay as provenance."""
    landing = tmp_path / "landing" / "src"
    files = {
        "fineweb.parquet": _parquet(
            pa.table({"text": ["fw one"], "id": ["fw-1"], "url": ["https://fw.example/1"], "date": ["2024-02-20"]})
        ),
        "export.parquet": _parquet(pa.table({"text": ["hf one", "hf two"]})),
        "other.parquet": _parquet(pa.table({"doc_id": ["o-1", "o-2"], "content": ["other one", "other two"]})),
        "web.jsonl": (json.dumps({"id": "j-1", "text": "jsonl text", "url": "https://j.example/"}) + "\n").encode(),
    }
    write_drop_files(str(landing / "drop-1"), files)
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    docs = docs_of(out)
    assert set(docs) == {"fw-1", "drop-1/export.parquet/1", "drop-1/export.parquet/2", "j-1"}
    fw = docs["fw-1"]
    assert fw["metadata"]["url"] == "https://fw.example/1" and fw["created"] == "2024-02-20"
    assert fw["metadata"]["landing_file"] == "fineweb.parquet" and fw["metadata"]["landing_line"] == 1
    assert docs["j-1"]["metadata"]["url"] == "https://j.example/"
    assert meta["quarantine_reasons"] == {"parquet_schema": 2}  # other.parquet: no 'text' column, rows counted
    [row] = quarantine_of(out)
    assert row["file"] == "other.parquet" and "text_key" in row["detail"] and "'content'" in row["detail"]
    named = str(tmp_path / "named")
    run_raw(RawConfig(str(landing), "drop-1", named, text_key="content", id_key="doc_id"))
    assert docs_of(named)["o-2"]["text"] == "other two"


def test_invalid_utf8_in_a_parquet_row_is_quarantined_alone(tmp_path):
    # Arrow does not validate what another writer stored: build such a column without checks.
    raw_bytes = pa.array([b"good one", b"bad \xff\xfe text", b"good three"], pa.binary())
    text = pa.Array.from_buffers(pa.string(), len(raw_bytes), raw_bytes.buffers())
    landing = tmp_path / "landing" / "src"
    write_drop_files(str(landing / "drop-1"), {"x.parquet": _parquet(pa.table({"id": ["a", "b", "c"], "text": text}))})
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    assert set(docs_of(out)) == {"a", "c"} and meta["quarantine_reasons"] == {"invalid_utf8": 1}
    [row] = quarantine_of(out)
    assert (row["file"], row["line"]) == ("x.parquet", 2) and "x.parquet row 2" in row["detail"]


def test_truncated_warc_is_reported_and_a_cut_record_quarantined(tmp_path):
    """FastWARC stops quietly at the end of a truncated file: the raw stage reports it, keeps the
    records before, quarantines a record whose content was cut, and reports nothing for whole
    files compressed per record (Common Crawl) or as one stream."""
    pages = [
        WarcPage(f"p{i}", f"https://p.example/{i}", "2024-01-01T00:00:00Z", f"<p>{i} " + "w " * 300) for i in range(6)
    ]
    per_record = encode_warc_gz(pages, "x.warc.gz")
    plain = gzip.decompress(per_record)
    files = {
        "half.warc.gz": per_record[: len(per_record) // 2],
        "last_cut.warc.gz": per_record[:-30],
        "whole.warc.gz": per_record,
        "one_stream.warc.gz": gzip.compress(plain),
        "one_frame.warc.zst": zstandard.ZstdCompressor().compress(plain),
        "plain_cut.warc": plain[:-100],
    }
    landing = tmp_path / "landing" / "src"
    write_drop_files(str(landing / "drop-1"), files)
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    rows = {(r["file"], r["reason"]): r for r in quarantine_of(out)}
    assert {file for file, _ in rows} == {"half.warc.gz", "last_cut.warc.gz", "plain_cut.warc"}, rows
    assert meta["quarantine_reasons"] == {"corrupt_warc": 3}
    cut = rows[("last_cut.warc.gz", "corrupt_warc")]
    assert cut["id"] == warc_record_id("p5") and cut["line"] == 6 and "cut short" in cut["detail"]
    per_file: dict[str, set[str]] = {}
    for doc in (r for f in list_files(f"{out}/docs", ".jsonl.gz") for r in read_jsonl_gz(f)):
        per_file.setdefault(doc["metadata"]["landing_file"], set()).add(doc["id"])
    every = {warc_record_id(f"p{i}") for i in range(6)}
    assert per_file["whole.warc.gz"] == per_file["one_stream.warc.gz"] == per_file["one_frame.warc.zst"] == every
    assert per_file["last_cut.warc.gz"] == per_file["plain_cut.warc"] == every - {warc_record_id("p5")}
    assert {warc_record_id("p0"), warc_record_id("p1")} <= per_file["half.warc.gz"] < every


def test_plain_text_records_pass_the_text_stage_unchanged(tmp_path):
    """FineWeb / C4-style inputs hold text, not HTML: run through the HTML extractor, their
    paragraphs would merge and spans like ``x<y ... vector<int>`` vanish. The raw stage marks them
    ``text/plain`` (HTML records ``text/html``) and the text stage passes them through."""
    plain = "First paragraph: a < b and x<y.\n\nSecond paragraph: vector<int> v; if (a<b && c>d) return;"
    html = "<html><body><p>Hello <b>page</b>.</p></body></html>"
    landing = tmp_path / "landing" / "src"
    files = {
        "rows.parquet": _parquet(pa.table({"id": ["plain"], "text": [plain]})),
        "pages.jsonl": (json.dumps({"id": "html", "text": html}) + "\n").encode(),
    }
    write_drop_files(str(landing / "drop-1"), files)
    raw = str(tmp_path / "raw")
    run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=raw))
    assert {k: d["metadata"]["content_type"] for k, d in docs_of(raw).items()} == {
        "plain": "text/plain",
        "html": "text/html",
    }
    html_to_md(SimpleHtmlToMdConfig(raw, str(tmp_path / "text"), "resiliparse", CURATION_EXTRACTION))
    texts = docs_of(str(tmp_path / "text"))
    assert texts["plain"]["text"] == plain and texts["html"]["text"] == "Hello page."
    forced = str(tmp_path / "forced")
    run_raw(RawConfig(str(landing), "drop-1", forced, content_type="text/html"))
    assert docs_of(forced)["plain"]["metadata"]["content_type"] == "text/html"


def test_bz2_and_xz_json_lines_are_sniffed_and_streamed(tmp_path):
    import bz2
    import lzma

    landing = tmp_path / "landing" / "src"
    files = {
        "a.jsonl": bz2.compress(_jsonl("bz", 3)),  # named as plain: the content decides
        "b.data": lzma.compress(_jsonl("xz", 2)),
        # Two streams (as appended files), the second truncated: the first stream's lines are kept.
        "c.jsonl.bz2": bz2.compress(_jsonl("first", 50)) + bz2.compress(_jsonl("cut", 5000))[:-200],
    }
    write_drop_files(str(landing / "drop-1"), files)
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out))
    ids = set(docs_of(out))
    assert {f"bz-{i}" for i in range(3)} | {f"xz-{i}" for i in range(2)} <= ids
    assert {f"first-{i}" for i in range(50)} <= ids and len({i for i in ids if i.startswith("cut-")}) < 5000
    assert meta["formats"] == {"jsonl.bz2": 2, "jsonl.xz": 1}
    assert meta["quarantine_reasons"] == {"truncated_bz2": 1}
