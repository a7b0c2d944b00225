"""Fast checks of the browser's parts: paging every shard format, filters, path confinement, gs://, links."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from marin_assets.browse.filters import FilterError, matches_all, parse_filter
from marin_assets.browse.links import browser_url
from marin_assets.browse.paths import Forbidden, PrefixRoot
from marin_assets.browse.server import BrowserApp
from marin_assets.browse.shards import ShardPager

RECORDS = [{"id": f"d{i}", "text": "x" * (i % 50), "n": i} for i in range(2345)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("shards")
    data = ("\n".join(json.dumps(r) for r in RECORDS) + "\n").encode()
    (d / "a.jsonl").write_bytes(data)
    (d / "a.jsonl.gz").write_bytes(gzip.compress(data[:5000]) + gzip.compress(data[5000:]))  # two members
    (d / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(data))
    pq.write_table(pa.Table.from_pylist(RECORDS), d / "a.parquet", row_group_size=300)
    paths = {ext: str(d / f"a.{ext}") for ext in ("jsonl", "jsonl.gz", "jsonl.zst", "parquet")}
    # The content decides, not the name (the one compression layer): gzip named .jsonl, xz, bz2.
    (d / "gzip_named_plain.jsonl").write_bytes(gzip.compress(data))
    (d / "xz_named_plain.jsonl").write_bytes(lzma.compress(data))
    (d / "bz2_named_gz.jsonl.gz").write_bytes(bz2.compress(data))
    for name in ("gzip_named_plain.jsonl", "xz_named_plain.jsonl", "bz2_named_gz.jsonl.gz"):
        paths[name] = str(d / name)
    return paths


@pytest.mark.parametrize(
    "ext",
    [
        "jsonl",
        "jsonl.gz",
        "jsonl.zst",
        "parquet",
        "gzip_named_plain.jsonl",
        "xz_named_plain.jsonl",
        "bz2_named_gz.jsonl.gz",
    ],
)
def test_every_format_pages_forward_jumps_and_filters(shards, ext):
    pager = ShardPager()
    got, start = [], 0
    while True:
        page = pager.page(shards[ext], start, 100)
        if not page.records:
            break
        got += [r["n"] for _, r in page.records]
        start = page.next_start
    assert got == list(range(len(RECORDS)))
    assert [r["n"] for _, r in pager.page(shards[ext], 1000, 7).records] == list(range(1000, 1007))
    kept, start = [], 0
    while True:
        page = pager.page(shards[ext], start, 10, matches=lambda b: [r["n"] % 7 == 0 for _, r in b], batch=50)
        kept += [r["n"] for _, r in page.records]
        if page.at_end:
            break
        start = page.next_start
    assert kept == [i for i in range(len(RECORDS)) if i % 7 == 0]
    assert len(pager.checkpoints) <= pager.checkpoints.max_entries


def test_filters_abbreviate_attribute_names_and_compare_by_type():
    row = {"quality_hq": 0.3, "dedup_fuzzy_duplicate": 1, "dedup_fuzzy_duplicate_of": "x", "reason": "low quality"}
    assert matches_all(parse_filter("quality < 0.5 and duplicate = true"), row)
    assert not matches_all(parse_filter("quality >= 0.5"), row)
    assert matches_all(parse_filter("reason ~ QUALITY"), row)
    assert not matches_all(parse_filter("missing_field = 1"), row)
    with pytest.raises(FilterError):
        parse_filter("quality <")


def test_paths_stay_below_the_prefix(tmp_path):
    (tmp_path / "p" / "a").mkdir(parents=True)
    (tmp_path / "p" / "out").symlink_to(tmp_path)
    root = PrefixRoot(str(tmp_path / "p"))
    assert root.resolve("a").endswith("/p/a")
    assert root.resolve(str(tmp_path / "p" / "a")) == root.resolve("a")  # a full path below the prefix
    for bad in ("../x", "a/../../x", "gs://other/x", "out", "a\\..\\x", "a/\x00", "/etc/passwd", str(tmp_path)):
        with pytest.raises(Forbidden):
            root.resolve(bad)
    assert PrefixRoot("gs://bucket/marin").resolve("a/b") == "gs://bucket/marin/a/b"
    assert PrefixRoot("gs://bucket/marin").resolve("gs://bucket/marin/a/b") == "gs://bucket/marin/a/b"
    for bad in ("../other", "gs://bucket/marin-other/x", "gs://bucket/x", "/marin/a"):
        with pytest.raises(Forbidden):
            PrefixRoot("gs://bucket/marin").resolve(bad)


def test_browser_reads_a_gs_prefix(gcs_prefix):
    import fsspec

    data = "".join(json.dumps(r) + "\n" for r in RECORDS[:60]).encode()
    with fsspec.open(f"{gcs_prefix}/step-abc/docs/shard-00000.jsonl.gz", "wb") as handle:
        handle.write(gzip.compress(data))
    app = BrowserApp(gcs_prefix)
    listing = app.get("/browse/step-abc/docs")
    assert listing.status == 200 and "shard-00000.jsonl.gz" in listing.body
    page = app.get("/browse/step-abc/docs/shard-00000.jsonl.gz?start=40&n=10")
    assert page.status == 200 and ">d40<" in page.body and ">d49<" in page.body and ">d50<" not in page.body
    doc = app.get("/doc/step-abc/docs/shard-00000.jsonl.gz?id=d42")
    assert doc.status == 200 and "Document d42" in doc.body
    assert app.get("/browse/../x").status == 403
    assert app.get("/browse//etc/passwd").status == 403 and app.get("/browse/gs://other-bucket/x").status == 403


def test_dagster_links_point_at_the_browser(monkeypatch):
    monkeypatch.setenv("MARIN_BROWSER_URL", "http://browse.example:8765/")
    assert (
        browser_url("/data/curation/raw-abc/drop 1", "/data")
        == "http://browse.example:8765/browse/curation/raw-abc/drop%201"
    )
    assert browser_url("/elsewhere/x", "/data") is None


def test_filtered_page_that_overshoots_has_a_next_page(tmp_path):
    """A filter batch bigger than the page reads matches past it: the page is not the last one."""
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS[:30]))
    pager = ShardPager()
    page = pager.page(str(path), 0, 10, matches=lambda b: [True] * len(b), batch=50)
    assert [i for i, _ in page.records] == list(range(10)) and not page.at_end and page.next_start == 10
    seen, start = [], 0
    while True:
        page = pager.page(str(path), start, 10, matches=lambda b: [r["n"] % 2 == 0 for _, r in b], batch=50)
        seen += [r["n"] for _, r in page.records]
        if page.at_end:
            break
        start = page.next_start
    assert seen == list(range(0, 30, 2))
    (tmp_path / "p" / "x" / "docs").mkdir(parents=True)
    (tmp_path / "p" / "x" / "docs" / "s.jsonl").write_bytes(path.read_bytes())
    app = BrowserApp(str(tmp_path / "p"), page_size=5)
    body = app.get("/browse/x/docs/s.jsonl?filter=n+%3E%3D+0&n=5").body
    assert 'id="next-page"' in body and ">d4<" in body and ">d5<" not in body


def _planted_prefix(tmp_path):
    """A prefix whose experiment record and configs name outputs outside it (with a secret there)."""
    prefix, outside = tmp_path / "prefix", tmp_path / "outside"
    shard = "shard-00000.jsonl"
    secret = {"id": "d1", "text": "TOP SECRET TEXT", "attributes": {"secret_attr": "TOP SECRET ATTR"}}
    for out in ("steal-abc", "down-abc"):
        (outside / out / "docs").mkdir(parents=True)
        (outside / out / "attributes").mkdir()
        (outside / out / "docs" / shard).write_text(json.dumps(secret) + "\n")
        (outside / out / "attributes" / shard).write_text(json.dumps(secret) + "\n")
        (outside / out / ".executor_status").write_text(json.dumps({"status": "SUCCESS"}))
    inside = prefix / "inside-abc"
    (inside / "docs").mkdir(parents=True)
    (inside / "docs" / shard).write_text(json.dumps({"id": "d1", "text": "inside text"}) + "\n")
    (inside / ".executor_info").write_text(
        json.dumps({"name": "inside", "config": {"input_path": str(outside / "steal-abc")}})
    )
    (outside / "down-abc" / ".executor_info").write_text(
        json.dumps({"name": "down", "config": {"input_path": str(inside), "x": str(outside / "steal-abc")}})
    )
    (outside / "info.json").write_text(json.dumps({"name": "linked", "config": {"token": "TOP SECRET CONFIG"}}))
    linked = prefix / "linked-abc"
    linked.mkdir()
    (linked / ".executor_info").symlink_to(outside / "info.json")  # a planted symlink inside an output
    (prefix / "experiments").mkdir()
    steps = [
        {"name": "inside", "output_path": str(inside), "hash": "abc"},
        {"name": "steal", "output_path": str(outside / "steal-abc"), "hash": "abc"},
        {"name": "down", "output_path": str(outside / "down-abc"), "hash": "abc"},
        {"name": "dotdot", "output_path": f"{prefix}/../outside/steal-abc", "hash": "abc"},
        {"name": "part", "output_path": str(prefix / "p-abc"), "partitioned_by": "drop", "hash": "abc"},
        {"name": "linked", "output_path": str(linked), "hash": "abc"},
    ]
    record = {"steps": steps, "partitions": {"drop": ["../../outside/steal-abc"]}, "description": "planted"}
    (prefix / "experiments" / "planted.json").write_text(json.dumps(record))
    (outside / "leaked.json").write_text(json.dumps({"description": "TOP SECRET RECORD", "steps": []}))
    (prefix / "experiments" / "leaked.json").symlink_to(outside / "leaked.json")
    return prefix


def test_planted_records_never_open_a_path_outside_the_prefix(tmp_path):
    """Experiment records and ``.executor_info`` configs are untrusted: an output they name outside
    the prefix (absolute, ``..``, a partition key, a symlinked info file) is never read or shown."""
    app = BrowserApp(str(_planted_prefix(tmp_path)))
    doc = app.get("/doc/inside-abc/docs/shard-00000.jsonl?id=d1")
    assert doc.status == 200 and "inside text" in doc.body
    assert "TOP SECRET" not in doc.body and "Before:" not in doc.body and "After:" not in doc.body
    records = app.get("/browse/inside-abc/docs/shard-00000.jsonl")
    assert records.status == 200 and "TOP SECRET" not in records.body and "id='related'" not in records.body
    index = app.get("/")
    assert index.status == 200 and "planted.json" in index.body and "TOP SECRET" not in index.body
    assert app.get("/experiment/leaked.json").status == 404
    experiment = app.get("/experiment/planted.json")
    assert experiment.status == 200 and experiment.body.count("(outside the prefix)") == 4
    assert "status SUCCESS" not in experiment.body  # the outside outputs' status files were not read
    linked = app.get("/browse/linked-abc")
    assert linked.status == 200 and "TOP SECRET" not in linked.body
    rel = app.catalog.relations(str(tmp_path / "prefix" / "inside-abc"), "shard-00000.jsonl")
    assert (rel.attributes, rel.upstream, rel.downstream) == ([], [], [])


def test_host_header_and_absolute_targets_must_name_this_server(tmp_path):
    """DNS rebinding: a page of another site whose name resolves here sends its own Host; refused
    (421), as is an absolute-form target for another host. 127.0.0.1, localhost, --host and
    --allowed_host are served; /healthz answers any host (probes send a pod IP)."""
    from tests.browse.conftest import start_browser, stop_browser

    (tmp_path / "p" / "a").mkdir(parents=True)
    server = start_browser(str(tmp_path / "p"), "--allowed_host", "browse.example")
    port = server.url.rsplit(":", 1)[1]
    try:
        for host in (f"127.0.0.1:{port}", "localhost", f"LOCALHOST:{port}", "browse.example", f"browse.example:{port}"):
            assert server.get("/browse/a", host_header=host)[0] == 200, host
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "browse.example.evil", ""):
            status, body = server.get("/browse/a", host_header=host)
            assert status == 421 and "--allowed_host" in body, host
        assert server.get(f"http://127.0.0.1:{port}/browse/a")[0] == 200
        for target in (f"http://evil.example:{port}/browse/a", "http://evil.example/", "ftp://127.0.0.1/browse/a"):
            assert server.get(target)[0] in (400, 421), target
            assert server.get(target, host_header=f"127.0.0.1:{port}")[0] in (400, 421), target
        assert server.get("/healthz", host_header="10.1.2.3:8765") == (200, "ok")
    finally:
        stop_browser(server)


def test_gs_listing_is_never_served_from_a_stale_cache(gcs_prefix):
    """gcsfs caches listings per instance (one per thread): another writer's new shard must appear."""
    import fsspec
    import gcsfs

    fs = fsspec.filesystem("gs")
    fs.pipe_file(f"{gcs_prefix}/step-abc/docs/shard-00000.jsonl", b'{"id": "a", "text": "x"}\n')
    app = BrowserApp(gcs_prefix)
    assert "shard-00000.jsonl" in app.get("/browse/step-abc/docs").body
    assert len(fs.ls(f"{gcs_prefix}/step-abc/docs")) == 1  # fsspec's default instance caches this listing
    other = gcsfs.GCSFileSystem(token="anon", skip_instance_cache=True)  # another process, in effect
    other.pipe_file(f"{gcs_prefix}/step-abc/docs/shard-00001.jsonl".removeprefix("gs://"), b'{"id": "b"}\n')
    assert fs.ls(f"{gcs_prefix}/step-abc/docs") == [f"{gcs_prefix}/step-abc/docs/shard-00000.jsonl"[5:]]  # stale
    listing = app.get("/browse/step-abc/docs").body
    assert "shard-00000.jsonl" in listing and "shard-00001.jsonl" in listing
    assert app.get("/browse/step-abc/docs/shard-00001.jsonl").status == 200
