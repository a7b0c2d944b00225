"""End to end through the real curation pipeline (issue 30, tests): a drop per bad kind, a drop that
fails, then a good drop -- the good drop's records reach the consolidated output and no drop's
failure stops another's dedup; the failed drop, fixed and re-run, is deduplicated against the drops
before it and leaves the later drops' outputs as they were. Slow (the whole pipeline, twice)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions
from marin_assets.execution.runner import run_steps
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.curation import PARTITION_SET
from marin_assets.experiments.curation_pipeline import curation_steps
from marin_assets.experiments.sample_data import write_drop
from marin_assets.landing.zone import landing_root, write_manifest
from tests.curation.conftest import SMALL, SOURCE, run_pipeline

pytestmark = pytest.mark.slow

PAGE = (
    "<html><body><h1>Page {i}</h1><p>"
    + "An ordinary paragraph of a crawled page about gardening. " * 6
    + "</p></body></html>"
)


def _drop_dir(prefix: str, drop: str) -> str:
    path = os.path.join(landing_root(prefix), SOURCE, drop)
    os.makedirs(path)
    return path


def _lying_warc(prefix: str, drop: str) -> None:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for i, lie in enumerate(
        [
            None,
            ("Content-Encoding", "gzip"),
            ("Content-Encoding", "br"),
            None,
            ("Transfer-Encoding", "chunked"),
            ("Content-Encoding", "x-unknown"),
            None,
        ]
    ):
        headers = [("Content-Type", "text/html; charset=utf-8"), *([lie] if lie else [])]
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        payload = io.BytesIO(PAGE.format(i=f"{drop}-{i}").encode())
        writer.write_record(
            writer.create_warc_record(f"http://example.org/{drop}/{i}", "response", payload=payload, http_headers=http)
        )
    path = _drop_dir(prefix, drop)
    with open(os.path.join(path, "crawl.warc.gz"), "wb") as handle:
        handle.write(buf.getvalue())
    write_manifest(path, SOURCE)


def _smalls(prefix: str, drop: str) -> None:
    line = lambda i: json.dumps({"id": f"{drop}-{i}", "text": PAGE.format(i=f"{drop}-{i}")})  # noqa: E731
    data = (
        (line(0) + "\n").encode()
        + b"\xef\xbb\xbf"
        + (line(1) + "\n").encode()  # concatenated files
        + (line(2)[:-1] + ', "score": NaN}\r').encode()  # lone CR, NaN
        + (json.dumps({"id": f"{drop}-zw", "text": "\u200b\u200d"}) + "\n").encode()
    )
    path = _drop_dir(prefix, drop)
    with open(os.path.join(path, "part.jsonl"), "wb") as handle:
        handle.write(data)
    write_manifest(path, SOURCE)


def test_bad_drops_fail_alone_and_the_good_drop_reaches_the_output(tmp_path):
    prefix = str(tmp_path / "prefix")
    write_drop(prefix, "drop-001", SMALL, SOURCE)
    _lying_warc(prefix, "drop-002")
    _smalls(prefix, "drop-003")
    write_drop(prefix, "drop-004", SMALL, SOURCE)
    broken = os.path.join(landing_root(prefix), SOURCE, "drop-004", "part-00000.jsonl.gz")
    original = Path(broken).read_bytes()
    with open(broken, "wb") as handle:  # its bytes no longer match the manifest: the raw step fails
        handle.write(original[:-10] + b"0" * 10)
    write_drop(prefix, "drop-005", SMALL, SOURCE)
    drops = [f"drop-{i:03d}" for i in range(1, 6)]

    with pytest.raises(ExecutorError) as failure:
        run_pipeline(prefix, drops)
    assert [name for name, _, _ in failure.value.failed] == ["curation/raw[drop-004]"]
    steps = curation_steps(f"landing/{SOURCE}", use_ray=False)
    graph = StepGraph(list(steps.values()), prefix, {PARTITION_SET: drops})
    path = lambda role, drop: graph.resolved(steps[role]).partition_output_path(drop)  # noqa: E731
    status = lambda role, drop: read_status(path(role, drop)).status  # noqa: E731
    for drop in ("drop-001", "drop-002", "drop-003", "drop-005"):
        assert status("consolidated", drop) == "SUCCESS", drop
    assert status("dedup", "drop-004") == "DEP_FAILED" and status("consolidated", "drop-004") == "DEP_FAILED"
    # The bad kinds of drop-002 / drop-003 were quarantined per record; their good records went on.
    raw2 = read_metadata(path("raw", "drop-002"))
    assert raw2["documents_out"] == 3 and raw2["quarantined"] >= 4
    raw3 = read_metadata(path("raw", "drop-003"))
    assert raw3["documents_out"] == 3
    # drop-005 was deduplicated against every drop that succeeded, and its records are published.
    dedup5 = read_metadata(path("dedup", "drop-005"))
    assert dedup5["deduplicated_against"] == ["drop-001", "drop-002", "drop-003"]
    assert "drop-004" in dedup5["earlier_drops_without_index"]
    assert read_metadata(path("consolidated", "drop-005"))["documents_out"] > 0

    # Fixed and re-run: drop-004 is deduplicated against the drops before it; drop-005 stays as it was.
    with open(broken, "wb") as handle:
        handle.write(original)
    report = run_steps(
        list(steps.values()),
        prefix,
        ExecutorOptions(max_concurrent=1, force_run_failed=True),
        partitions={PARTITION_SET: drops},
    )
    ran = {(o.name, o.partition) for o in report.outcomes if o.action == "ran"}
    assert ("curation/consolidated", "drop-004") in ran and ("curation/dedup", "drop-005") not in ran
    assert read_metadata(path("dedup", "drop-004"))["deduplicated_against"] == ["drop-001", "drop-002", "drop-003"]
    assert read_metadata(path("dedup", "drop-005"))["deduplicated_against"] == ["drop-001", "drop-002", "drop-003"]
