"""Fast checks of the browser's parts: paging every shard format, filters, path confinement, gs://, links."""

from __future__ import annotations

import gzip
import json

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
    return {ext: str(d / f"a.{ext}") for ext in ("jsonl", "jsonl.gz", "jsonl.zst", "parquet")}


@pytest.mark.parametrize("ext", ["jsonl", "jsonl.gz", "jsonl.zst", "parquet"])
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
