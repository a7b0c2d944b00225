"""Issue 24.4: no good record lost to damaged compression or a non-object line, nothing hidden.

Each bad-input kind sits in a drop beside good files: every good record (of the good files, and
of the bad file before its damage) is kept, the damage is quarantined once with its byte offset,
and the next drop is processed as usual. All files are far under the readers' 1 MB read chunk,
the case where a whole file used to be lost.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys

import pytest
import zstandard

from marin_assets.core.compression import StreamDecoder
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.zone import STATUS_VALID, validate_drop
from tests.curation.conftest import SOURCE, run_pipeline
from tests.curation.test_raw_bad_input import _run_one, _write_drop

COMPRESS = {
    "gzip": gzip.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}
SUFFIX = {"gzip": "gz", "zstd": "zst", "bz2": "bz2", "xz": "xz"}


def _records(prefix: str, n: int) -> bytes:
    return "".join(
        json.dumps({"id": f"{prefix}-{i}", "text": f"<p>document {prefix} {i} " + "words " * 20 + "</p>"}) + "\n"
        for i in range(n)
    ).encode()


def _ids(prefix: str, n: int) -> set[str]:
    return {f"{prefix}-{i}" for i in range(n)}


def _damaged(member: bytes) -> bytes:
    """``member`` with 40 bytes in its middle flipped (each codec's checks catch it)."""
    mid = len(member) // 2
    return member[:mid] + bytes(b ^ 0x55 for b in member[mid : mid + 40]) + member[mid + 40 :]


def _prefix_kept(kept: set[str], prefix: str, n: int) -> int:
    """How many of ``prefix-0 .. prefix-(n-1)`` were kept; asserts they are a prefix (no holes)."""
    count = len({i for i in kept if i.startswith(prefix + "-")})
    assert _ids(prefix, count) <= kept, (prefix, count)
    return count


def test_trailing_bytes_keep_every_record_and_are_quarantined_with_their_offset(tmp_path):
    """Junk appended by an uploader or zero padding (tar-style) after the end of the stream: all
    records kept, one ``trailing_<codec>`` record at the first byte after the stream (xz's own
    stream padding excepted)."""
    files, ends = {}, {}
    for codec, compress in COMPRESS.items():
        for kind, tail in (("junk", b"appended by an uploader\n"), ("pad", b"\x00" * 10_240)):
            packed = compress(_records(f"{codec}-{kind}", 300))
            files[f"{codec}_{kind}.jsonl.{SUFFIX[codec]}"] = packed + tail
            ends[f"{codec}_{kind}.jsonl.{SUFFIX[codec]}"] = (codec, len(packed))
    files["good.jsonl.gz"] = gzip.compress(_records("good", 50))
    meta, kept, rows = _run_one(tmp_path, files)
    assert kept["good.jsonl.gz"] == _ids("good", 50)
    for name, (codec, end) in ends.items():
        kind = name.split("_")[1].split(".")[0]
        assert kept[name] == _ids(f"{codec}-{kind}", 300), name
        if name == "xz_pad.jsonl.xz":  # zero bytes in a multiple of four are xz's own stream padding
            assert not [r for r in rows if r["file"] == name]
            continue
        [row] = [r for r in rows if r["file"] == name]
        assert (row["reason"], row["offset"], row["line"]) == (f"trailing_{codec}", end, 301), row
        assert f"at byte {end}" in row["detail"] and "300 line(s) before kept" in row["detail"]
    assert meta["documents_out"] == 50 + 300 * len(ends)
    assert meta["quarantine_reasons"] == {"trailing_gzip": 2, "trailing_zstd": 2, "trailing_bz2": 2, "trailing_xz": 1}


@pytest.mark.parametrize("codec", list(COMPRESS))
def test_damaged_member_keeps_the_members_before_it(tmp_path, codec):
    """A good member, a damaged one, a good one: the first member's records all kept, the
    damaged member's good lines before the damage kept as a prefix, the damage quarantined at
    the damaged member's offset; the good file beside it untouched."""
    compress = COMPRESS[codec]
    first = compress(_records("first", 200))
    data = first + _damaged(compress(_records("second", 200))) + compress(_records("third", 20))
    name = f"members.jsonl.{SUFFIX[codec]}"
    meta, kept, rows = _run_one(tmp_path, {name: data, "good.jsonl": _records("good", 10)})
    assert kept["good.jsonl"] == _ids("good", 10)
    assert _ids("first", 200) <= kept[name] and not any(i.startswith("third") for i in kept[name])
    second = _prefix_kept(kept[name], "second", 200)
    assert second < 200
    damage = [r for r in rows if r["reason"] == f"corrupt_{codec}"]
    assert len(damage) == 1 and damage[0]["offset"] == len(first), rows
    assert damage[0]["line"] == 200 + second + 1
    # Nothing else of the file is quarantined (a line cut by the damage is the damage's sample).
    assert [r for r in rows if r["file"] == name] == damage


@pytest.mark.parametrize("codec", list(COMPRESS))
def test_truncated_file_reports_its_cut_line_once(tmp_path, codec):
    """A file cut off in the middle of a line: the lines before kept, the cut line reported once
    (as the truncation's sample, never again as ``not_json``), at the offset where the file ends."""
    whole = COMPRESS[codec](_records("cut", 400))
    probe = StreamDecoder(codec)  # how much a reader can decode from this cut (codecs emit in blocks)
    cut_at = len(whole) - 30
    text = probe.decode(whole[:cut_at])
    assert probe.finish() is not None and probe.damage.kind == "truncated"
    complete = text.count(b"\n")
    name = f"cut.jsonl.{SUFFIX[codec]}"
    meta, kept, rows = _run_one(tmp_path, {name: whole[:cut_at], "good.jsonl": _records("good", 5)})
    assert kept == {name: _ids("cut", complete), "good.jsonl": _ids("good", 5)}
    assert [(r["reason"], r["line"], r["offset"]) for r in rows] == [(f"truncated_{codec}", complete + 1, cut_at)]
    tail = text[text.rfind(b"\n") + 1 :]
    assert rows[0]["sample"] == (tail.decode()[:200] if tail else None)
    assert meta["quarantined"] == 1


def test_truncated_zstd_mid_line_is_not_reported_twice(tmp_path):
    """The issue's case: a one-frame zstd file cut a few bytes before its end."""
    whole = zstandard.ZstdCompressor().compress(_records("z", 3000))
    meta, kept, rows = _run_one(tmp_path, {"z.jsonl.zst": whole[:-7]})
    assert len(rows) == 1 and rows[0]["reason"] == "truncated_zstd"
    assert rows[0]["line"] == len(kept["z.jsonl.zst"]) + 1 and rows[0]["sample"]
    assert "not_json" not in meta["quarantine_reasons"]


def test_every_non_object_json_line_is_quarantined(tmp_path):
    """``null``, numbers, strings, booleans and arrays are JSON but no record: each is quarantined
    on its line (``not_an_object``), nothing disappears without a trace."""
    good = _records("obj", 3).splitlines()
    lines = [good[0], b"null", b"42", b'"a string"', b"true", b"[1, 2]", good[1], b"  null  ", good[2]]
    data = b"\n".join(lines) + b"\n"
    meta, kept, rows = _run_one(tmp_path, {"mixed.jsonl": data, "mixed.jsonl.gz": gzip.compress(data)})
    assert kept == {"mixed.jsonl": _ids("obj", 3), "mixed.jsonl.gz": _ids("obj", 3)}
    for name in kept:
        got = sorted((r["line"], r["reason"]) for r in rows if r["file"] == name)
        assert got == [(n, "not_an_object") for n in (2, 3, 4, 5, 6, 8)], got
    assert "JSON value is null" in next(r["detail"] for r in rows if r["line"] == 2)
    assert meta["records_in"] == 6 and meta["quarantined"] == 12


def test_manifest_tool_refuses_unsafe_names_in_one_line(tmp_path):
    """``python -m marin_assets.landing.zone`` on a folder holding a file name with a newline: a
    one-line error and exit status 2, no traceback, no manifest."""
    drop = tmp_path / "landing" / "web" / "drop-001"
    drop.mkdir(parents=True)
    (drop / "good.jsonl").write_bytes(_records("g", 2))
    (drop / "bad\nname.jsonl").write_bytes(_records("b", 2))
    done = subprocess.run(
        [sys.executable, "-m", "marin_assets.landing.zone", str(drop)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "unsafe file name 'bad\\nname.jsonl'" in done.stderr and "no manifest written" in done.stderr
    assert not (drop / "manifest.json").exists()
    (drop / "bad\nname.jsonl").unlink()  # renamed by the user: the same command now makes a valid drop
    subprocess.run([sys.executable, "-m", "marin_assets.landing.zone", str(drop)], check=True, capture_output=True)
    assert validate_drop(str(drop), "drop-001")[0] == STATUS_VALID


@pytest.mark.slow  # the whole curation pipeline over two drops: ~1-2 min on 2 cores
def test_next_drop_processed_after_a_drop_of_every_bad_kind(tmp_path):
    """The whole curation pipeline over a drop holding every bad kind beside good files, then the
    next (sample) drop: both drops run every step; the bad drop's good records reach the end."""
    prefix = str(tmp_path / "prefix")
    files = {
        "good.jsonl.gz": gzip.compress(_records("good", 40)),
        "junk.jsonl.gz": gzip.compress(_records("junk", 40)) + b"junk",
        "pad.jsonl.zst": zstandard.ZstdCompressor().compress(_records("pad", 40)) + b"\x00" * 512,
        "member.jsonl.bz2": bz2.compress(_records("member", 40)) + _damaged(bz2.compress(_records("lost", 40))),
        "cut.jsonl.xz": lzma.compress(_records("cut", 40))[:-40],
        "nulls.jsonl": b"null\n" + _records("nulls", 40),
    }
    _write_drop(f"{prefix}/landing/{SOURCE}/drop-001", files)
    write_drop(prefix, "drop-002", SampleConfig(docs_per_drop=120), SOURCE)
    run = run_pipeline(prefix, ["drop-001", "drop-002"])
    for (name, partition), outcome in run.outcomes.items():
        assert outcome.action == "ran", (name, partition, outcome.error)
    raw = run.outcomes[(run.steps["raw"].name, "drop-001")].metadata
    assert set(raw["quarantine_reasons"]) == {"trailing_gzip", "trailing_zstd", "corrupt_bz2", "not_an_object"} | {
        "truncated_xz"
    }
    ids = {d["id"] for d in run.docs("raw", "drop-001")}
    assert all(_ids(p, 40) <= ids for p in ("good", "junk", "pad", "member", "nulls"))
    assert run.docs("raw", "drop-002")
