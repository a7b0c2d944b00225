"""Nothing inside one drop stops a sensor tick or another drop (issue 37, items 1, 2 and 6). Fast.

A drop per bad kind -- a folder 1,100 levels deep, an upload still running, records too deep, too
long a number, binary or invisible text, a WARC record without id, a gzip bomb line -- then a good
drop: the sensor's ticks never fail, the bad drop is rejected whole (or waited for) with one line
naming it, and every good record of a bad drop reaches the raw output while each bad one is
quarantined with its id. Also: content fingerprints, valid JSON metadata, no temporary file read as
an experiment record after a SIGKILL, and the bounded pieces of the decompressor.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import zstandard
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from marin_assets.browse.catalog import Catalog
from marin_assets.browse.paths import PrefixRoot
from marin_assets.core.compression import MAX_PIECE, StreamDecoder
from marin_assets.core.io import list_files, read_jsonl
from marin_assets.dagster_bridge.landing_sensor import build_landing_sensor
from marin_assets.execution.maintenance import recorded_steps
from marin_assets.execution.status import write_json
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.table import zone_rows
from marin_assets.landing.zone import (
    MAX_DROP_DEPTH,
    STATUS_INCOMPLETE,
    STATUS_REJECTED,
    STATUS_VALID,
    landing_root,
    validate_drop,
    write_manifest,
)
from marin_assets.transform.raw.process import RawConfig, run_raw

REPO = Path(__file__).resolve().parents[2]
SOURCE = "web"
drops_def = dg.DynamicPartitionsDefinition(name="edge_drops")


@dg.asset(partitions_def=drops_def)
def edge_target(context) -> None:  # a stand-in target: the sensor only needs something partitioned
    context.log.info(context.partition_key)


def _deep_folder(root: str, levels: int) -> str:
    """``root/d/d/.../d`` ``levels`` deep, made one level at a time (``os.makedirs`` recurses)."""
    path = root
    for _ in range(levels):
        path = os.path.join(path, "d")
        os.mkdir(path)
    return path


def _remove_deep(root: str) -> None:
    """Remove a folder tree of any depth without recursion (``shutil.rmtree`` recurses)."""
    stack = [root]
    while stack:
        top = stack[-1]
        children = list(os.scandir(top))
        dirs = [e.path for e in children if e.is_dir(follow_symlinks=False)]
        if dirs:
            stack.extend(dirs)
            continue
        for entry in children:
            os.unlink(entry.path)
        os.rmdir(top)
        stack.pop()


@pytest.fixture
def zone(tmp_path):
    return str(tmp_path / "zone")


def _drop_dir(prefix: str, drop: str, source: str = SOURCE) -> str:
    path = os.path.join(landing_root(prefix), source, drop)
    os.makedirs(path)
    return path


def test_a_folder_1100_levels_deep_rejects_its_drop_alone_and_no_tick_fails(zone, dagster_home):
    write_drop(zone, "drop-001", SampleConfig(docs_per_drop=5), SOURCE)
    deep_drop = _drop_dir(zone, "drop-002")
    with open(os.path.join(deep_drop, "part.jsonl"), "w") as handle:
        handle.write(json.dumps({"id": "a", "text": "b"}) + "\n")
    bottom = _deep_folder(deep_drop, 1100)
    with open(os.path.join(bottom, "leaf.jsonl"), "w") as handle:
        handle.write("{}\n")
    write_drop(zone, "drop-003", SampleConfig(docs_per_drop=5), SOURCE)
    try:
        with pytest.raises(ValueError, match="deeper than"):  # never RecursionError
            write_manifest(deep_drop)
        status, reason, _ = validate_drop(deep_drop, "drop-002")
        assert status == STATUS_REJECTED and f"deeper than {MAX_DROP_DEPTH} levels" in reason and "\n" not in reason

        sensor = build_landing_sensor(dg.AssetSelection.assets(edge_target), drops_def, lambda: zone, source=SOURCE)
        with dg.DagsterInstance.get() as instance:
            cursor = None
            for _ in range(2):  # every tick: no error, the later drop runs, the deep one is named
                result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
                assert isinstance(result, dg.SensorResult)
                cursor = result.cursor
                for request in result.dynamic_partitions_requests or []:
                    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
                if _ == 0:
                    assert sorted(r.partition_key for r in result.run_requests) == ["drop-001", "drop-003"]
            assert "deeper than" in json.loads(cursor)["rejected"]["drop-002"]
            assert "'drop-002'" in result.skip_reason.skip_message
    finally:
        _remove_deep(deep_drop)


def test_an_upload_in_progress_is_incomplete_then_runs_when_complete(zone, dagster_home):
    write_drop(zone, "drop-001", SampleConfig(docs_per_drop=5), SOURCE)
    drop = os.path.join(landing_root(zone), SOURCE, "drop-001")
    data = os.path.join(drop, "part-00000.jsonl.gz")
    whole = Path(data).read_bytes()
    Path(data).write_bytes(whole[: len(whole) // 2])  # the manifest came first; the data is still arriving
    status, reason, _ = validate_drop(drop, "drop-001")
    assert status == STATUS_INCOMPLETE and "upload in progress" in reason

    class Log:
        def __init__(self):
            self.lines = []

        def warning(self, msg):
            self.lines.append(msg)

        def info(self, msg):
            self.lines.append(msg)

        error = warning

        def debug(self, msg):
            pass

    from marin_assets.dagster_bridge.landing_sensor import evaluate_landing

    log = Log()
    cursor = None
    for _ in range(3):
        new, cursor, rejected = evaluate_landing(zone, SOURCE, cursor, lambda key: False, log)
        assert not new and not rejected
    assert log.lines == [] and json.loads(cursor)["rejected"] == {}  # not rejected, not logged every tick
    Path(data).write_bytes(whole)
    new, cursor, _ = evaluate_landing(zone, SOURCE, cursor, lambda key: False, log)
    assert [key for key, _, _ in new] == ["drop-001"]


def test_a_same_size_edit_with_its_mtime_put_back_is_flagged_changed(zone):
    write_drop(zone, "drop-001", SampleConfig(docs_per_drop=5), SOURCE)
    folder = os.path.join(landing_root(zone), SOURCE)
    state: dict = {}
    assert zone_rows(folder, SOURCE, set(), False, state)[0]["status"] == STATUS_VALID
    assert zone_rows(folder, SOURCE, {"drop-001"}, False, state)[0]["status"] == "processed"
    data = os.path.join(folder, "drop-001", "part-00000.jsonl.gz")
    before = os.stat(data)
    with open(data, "r+b") as handle:  # one byte flipped in place: same size
        handle.seek(30)
        byte = handle.read(1)
        handle.seek(30)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(data).st_size == before.st_size and os.stat(data).st_mtime_ns == before.st_mtime_ns
    row = zone_rows(folder, SOURCE, {"drop-001"}, False, state)[0]
    assert row["status"] == "changed after processing" and "sha256" in row["reason"]


def _warc(records: list[tuple[str, bytes, str, bool]]) -> bytes:
    """A gzip WARC of ``(url, body, content type, has a record id)`` responses."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for url, body, content_type, has_id in records:
        http = StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")
        record = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
        if not has_id:
            record.rec_headers.remove_header("WARC-Record-ID")
        writer.write_record(record)
    return buf.getvalue()


PAGE = b"<html><body><p>" + b"A paragraph of an ordinary page about gardening. " * 4 + b"</p></body></html>"


def bad_records_drop(prefix: str, drop: str, source: str = SOURCE) -> dict[str, set[str]]:
    """A drop holding one file per bad kind, each with good records around the bad ones; returns
    the ids expected in the output (``good``) and in quarantine (``quarantined``)."""
    path = _drop_dir(prefix, drop, source)
    deep: dict = {"leaf": 1}
    for _ in range(900):
        deep = {"k": deep}
    lines = [
        {"id": f"{drop}-good-1", "text": "A good record."},
        {"id": f"{drop}-deep", "text": "Metadata nested 900 levels.", "metadata": deep},
        {"id": f"{drop}-binary", "text": "\x00\x01\x02\x03PNG\x1a\x00\x00" * 50},
        {"id": f"{drop}-invisible", "text": "\u2066\u200b\u2069\u200d\u2067\u2069"},
        {"id": f"{drop}-good-2", "text": "Another good record."},
    ]
    with open(os.path.join(path, "records.jsonl"), "w") as handle:
        for record in lines:
            handle.write(json.dumps(record) + "\n")
        handle.write(json.dumps({"id": f"{drop}-bignum", "text": "x"})[:-1] + ', "n": ' + "7" * 5000 + "}\n")
    with open(os.path.join(path, "crawl.warc.gz"), "wb") as handle:
        handle.write(
            _warc(
                [
                    ("http://e.org/1", PAGE, "text/html", True),
                    ("http://e.org/no-id", PAGE, "text/html", False),
                    ("http://e.org/image", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20, "text/html", True),
                ]
            )
        )
    # A gzip bomb line: 64 MiB of one letter in ~64 KiB, between two good records.
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(os.path.join(path, "bomb.jsonl.gz"), "wb") as handle:
        handle.write(comp.compress((json.dumps({"id": f"{drop}-bomb-before", "text": "Kept."}) + "\n").encode()))
        handle.write(comp.compress(b'{"id": "bomb", "text": "'))
        for _ in range(8):
            handle.write(comp.compress(b"a" * (8 << 20)))
        handle.write(
            comp.compress(b'"}\n' + (json.dumps({"id": f"{drop}-bomb-after", "text": "Kept."}) + "\n").encode())
        )
        handle.write(comp.flush())
    write_manifest(path, source)
    return {
        "good": {f"{drop}-good-1", f"{drop}-good-2", f"{drop}-bomb-before", f"{drop}-bomb-after"},
        "quarantined": {f"{drop}-deep", f"{drop}-binary", f"{drop}-invisible", f"{drop}-bignum"},
    }


def test_every_bad_record_is_quarantined_by_id_and_its_drop_goes_on(tmp_path):
    prefix = str(tmp_path / "prefix")
    expected = bad_records_drop(prefix, "drop-001")
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(os.path.join(landing_root(prefix), SOURCE), "drop-001", out, max_doc_bytes=1_000_000))
    docs = [r for f in list_files(os.path.join(out, "docs"), ".jsonl.gz") for r in read_jsonl(f)]
    ids = {d["id"] for d in docs}
    assert expected["good"] <= ids
    quarantine = [r for f in list_files(os.path.join(out, "quarantine"), ".jsonl") for r in read_jsonl(f)]
    by_id = {r["id"]: r for r in quarantine if r["id"]}
    assert expected["quarantined"] <= set(by_id), sorted(by_id)
    assert not expected["quarantined"] & ids
    reasons = {by_id[f"drop-001-{kind}"]["reason"] for kind in ("deep", "binary", "invisible", "bignum")}
    assert reasons == {"too_deep", "binary_text", "empty_text", "number_too_long"}
    for kind in ("deep", "bignum"):  # the reason names the drop, the file and the record's line
        assert by_id[f"drop-001-{kind}"]["detail"].startswith("drop drop-001, file records.jsonl line ")
    # WARC: the record without WARC-Record-ID is kept under a synthetic id (file and offset);
    # the binary body labelled text/html is quarantined by its record id.
    warc_docs = [d for d in docs if d["metadata"].get("landing_file") == "crawl.warc.gz"]
    synthetic = [d for d in warc_docs if d["metadata"].get("synthetic_id")]
    assert len(warc_docs) == 2 and len(synthetic) == 1
    assert (
        synthetic[0]["id"]
        == f"drop-001/crawl.warc.gz@{synthetic[0]['metadata']['warc_offset']}:" + synthetic[0]["id"].rsplit(":", 1)[1]
    )
    assert any(r["reason"] == "binary_text" and r["file"] == "crawl.warc.gz" and r["id"] for r in quarantine)
    assert any(r["reason"] == "line_too_long" and r["file"] == "bomb.jsonl.gz" for r in quarantine)
    assert meta["documents_out"] == len(docs)


def test_decompression_hands_out_bounded_pieces_whatever_the_ratio():
    bomb = b"\x00" * (48 << 20)
    compressed = {
        "gzip": gzip.compress(bomb, 9),
        "bz2": bz2.compress(bomb, 9),
        "xz": lzma.compress(bomb),
        "zstd": zstandard.ZstdCompressor(level=19).compress(bomb),
    }
    for codec, data in compressed.items():
        decoder = StreamDecoder(codec)  # type: ignore[arg-type]
        biggest = total = 0
        for at in range(0, len(data), 1 << 20):  # the readers' chunk size
            for piece in decoder.decode_pieces(data[at : at + (1 << 20)]):
                biggest = max(biggest, len(piece))
                total += len(piece)
        assert decoder.finish() is None and total == len(bomb), codec
        assert biggest <= (8 << 20 if codec == "zstd" else MAX_PIECE), (codec, biggest)


def test_metadata_with_non_finite_floats_is_valid_json(tmp_path):
    path = str(tmp_path / ".executor_metadata.json")
    write_json(path, {"loss": float("nan"), "best": float("inf"), "worst": [float("-inf"), 1.5]})

    def refuse(token: str) -> float:
        raise ValueError(f"bare {token} is not JSON")

    data = json.loads(Path(path).read_text(), parse_constant=refuse)
    assert data == {"best": "Infinity", "loss": "NaN", "worst": ["-Infinity", 1.5]}


_KILLED_WRITER = """
import os, sys, time
from marin_assets.execution import storage
from marin_assets.execution.status import write_json
storage.os.replace = lambda *a: time.sleep(600)  # hold the write open right before its rename
write_json(sys.argv[1], {"description": "x" * 1000, "steps": []})
"""


def test_a_writer_killed_mid_write_leaves_no_experiment_record(tmp_path):
    prefix = str(tmp_path / "prefix")
    folder = os.path.join(prefix, "experiments")
    os.makedirs(folder)
    child = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, os.path.join(folder, "exp-abc.json")], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not any(n.startswith(".tmp-") for n in os.listdir(folder)):
            assert child.poll() is None and time.monotonic() < deadline, "the writer never started"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    leftover = [n for n in os.listdir(folder) if n.startswith(".tmp-")]
    assert leftover and not os.path.exists(os.path.join(folder, "exp-abc.json"))
    assert Catalog(PrefixRoot(prefix)).experiment_names() == []  # never shown as a record
    assert recorded_steps(prefix) == []  # nor read by maintenance
    from marin_assets.execution.status import sweep_stale_temporaries

    assert sweep_stale_temporaries(folder) == []  # a fresh temp may be a live writer's: kept
    old = time.time() - 3600
    os.utime(os.path.join(folder, leftover[0]), (old, old))
    assert sweep_stale_temporaries(folder) == leftover
    assert os.listdir(folder) == []


@dataclass(frozen=True)
class _NanConfig:
    output_path: str


def _returns_nan(config: _NanConfig) -> dict[str, float]:
    os.makedirs(config.output_path, exist_ok=True)
    return {"loss": float("nan"), "ratio": float("inf")}


def test_a_step_returning_nan_writes_valid_executor_metadata(tmp_path):
    from marin_assets.execution import ExecutorStep, this_output_path
    from marin_assets.execution.runner import ExecutorOptions, run_steps
    from marin_assets.execution.status import METADATA_FILE

    step = ExecutorStep("edges/nan", _returns_nan, _NanConfig(this_output_path()))
    report = run_steps([step], str(tmp_path), ExecutorOptions(max_concurrent=1))
    (outcome,) = report.outcomes
    text = Path(outcome.output_path, METADATA_FILE).read_text()

    def refuse(token: str) -> float:
        raise ValueError(f"bare {token} is not JSON")

    assert json.loads(text, parse_constant=refuse) == {"loss": "NaN", "ratio": "Infinity"}


def test_a_gzip_encoded_warc_payload_bomb_is_quarantined_unread():
    from marin_assets.core.shard_stage import Quarantine
    from marin_assets.transform.raw.warc_reader import read_warc

    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    pages = [(b"<html><p>first</p></html>", None), (gzip.compress(b"a" * (8 << 20), 9), "gzip"), (PAGE, None)]
    for i, (body, encoding) in enumerate(pages):
        headers = [("Content-Type", "text/html"), *([("Content-Encoding", encoding)] if encoding else [])]
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(f"http://e.org/{i}", "response", payload=io.BytesIO(body), http_headers=http)
        )
    q = Quarantine("raw", "bomb.warc.gz", "drop-1")
    docs = [doc for _, doc in read_warc(io.BytesIO(buf.getvalue()), q, "gzip", 1 << 20) if doc]
    assert [d["metadata"]["url"] for d in docs] == ["http://e.org/0", "http://e.org/2"]
    assert q.counts == {"too_large": 1} and q.records[0]["id"]


def test_a_parquet_page_over_the_limit_is_quarantined_by_id_and_other_row_groups_read(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    prefix = str(tmp_path / "prefix")
    path = _drop_dir(prefix, "drop-001")
    ids = [f"p-{i}" for i in range(6)]
    texts = ["A good row."] * 3 + ["One huge cell: " + "z" * (4 << 20)] + ["Another good row."] * 2
    # Row groups of 3 rows: the second holds the 4 MiB cell (its text page is over the reader's limit).
    pq.write_table(pa.table({"id": ids, "text": texts}), os.path.join(path, "rows.parquet"), row_group_size=3)
    write_manifest(path, SOURCE)
    out = str(tmp_path / "raw")
    # max_doc_bytes 1 MB: lines and pages may hold 3 MiB.
    run_raw(RawConfig(os.path.join(landing_root(prefix), SOURCE), "drop-001", out, max_doc_bytes=1_000_000))
    docs = {r["id"] for f in list_files(os.path.join(out, "docs"), ".jsonl.gz") for r in read_jsonl(f)}
    quarantine = [r for f in list_files(os.path.join(out, "quarantine"), ".jsonl") for r in read_jsonl(f)]
    assert docs == {"p-0", "p-1", "p-2"}
    assert {r["id"] for r in quarantine if r["reason"] == "too_large"} == {"p-3", "p-4", "p-5"}
    assert "row group 1 (rows 4-6)" in quarantine[0]["detail"] and "not decoded" in quarantine[0]["detail"]


def test_a_saved_hf_dataset_row_over_the_limit_is_quarantined_by_id(tmp_path):
    import datasets

    prefix = str(tmp_path / "prefix")
    path = _drop_dir(prefix, "drop-001")
    rows = {"id": ["h-0", "h-1", "h-2"], "text": ["A good row.", "w" * (4 << 20), "Another good row."]}
    datasets.Dataset.from_dict(rows).save_to_disk(os.path.join(path, "hf"))
    write_manifest(path, SOURCE)
    out = str(tmp_path / "raw")
    run_raw(RawConfig(os.path.join(landing_root(prefix), SOURCE), "drop-001", out, max_doc_bytes=1_000_000))
    docs = {r["id"] for f in list_files(os.path.join(out, "docs"), ".jsonl.gz") for r in read_jsonl(f)}
    quarantine = [r for f in list_files(os.path.join(out, "quarantine"), ".jsonl") for r in read_jsonl(f)]
    assert docs == {"h-0", "h-2"}
    assert [(r["reason"], r["id"]) for r in quarantine] == [("too_large", "h-1")]
    assert "over the reader's limit" in quarantine[0]["detail"]  # never converted to a Python string
