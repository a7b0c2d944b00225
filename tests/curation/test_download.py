"""``default_download``: an HF dataset id + revision from a local HF hub cache built here (no
network), revision and file hashes recorded, a clear error when something is missing, and the
output read by the raw stage as a drop."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from marin_assets.download.huggingface.download import DownloadConfig as OldNameDownloadConfig
from marin_assets.download.huggingface.download_hf import DownloadConfig, HfDatasetNotCachedError, download_hf
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import run_steps
from marin_assets.execution.step import versioned
from marin_assets.experiments.defaults import default_download
from marin_assets.transform.raw.process import RawConfig, run_raw
from tests.conftest import marin_hash

from .test_inputs import docs_of

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "tiny-org/tiny-web"


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """The on-disk layout of the HF hub cache: blobs, a snapshot of symlinks, refs/main."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = tmp_path / "hf" / "hub"
    repo = cache / f"datasets--{REPO.replace('/', '--')}"
    files = {
        "data/train.jsonl": "".join(
            json.dumps({"id": f"tw-{i}", "text": f"<p>tiny web page {i}</p>"}) + "\n" for i in range(4)
        ).encode(),
        "README.md": b"# tiny web\n",
    }
    for rel, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = repo / "snapshots" / COMMIT / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return str(cache), files


def test_download_from_offline_cache_records_revision_and_hashes(hf_cache, tmp_path):
    cache, files = hf_cache
    out = str(tmp_path / "out")
    meta = download_hf(DownloadConfig(REPO, "main", gcs_output_path=out, cache_dir=cache))
    assert meta["commit"] == COMMIT and meta["files"] == 2
    with open(f"{out}/provenance.json") as handle:
        provenance = json.load(handle)
    assert provenance["hf_dataset_id"] == REPO and provenance["revision"] == "main" and provenance["commit"] == COMMIT
    recorded = {f["path"]: f["sha256"] for f in provenance["files"]}
    assert recorded == {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    # Real files (not links into the cache), and the output is a valid drop for the raw stage.
    assert not os.path.islink(f"{out}/data/train.jsonl")
    raw = str(tmp_path / "raw")
    raw_meta = run_raw(RawConfig(landing_dir="", drop_id="hf", output_path=raw, drop_path=out))
    docs = docs_of(raw)
    assert set(docs) == {f"tw-{i}" for i in range(4)} and docs["tw-2"]["source"] == REPO
    assert docs["tw-2"]["metadata"]["landing_file"] == "data/train.jsonl"
    assert raw_meta["quarantine_reasons"] == {"unsupported_format": 1}  # README.md, counted, not lost silently


def test_globs_and_a_pinned_commit(hf_cache, tmp_path):
    cache, _ = hf_cache
    meta = download_hf(
        DownloadConfig(REPO, COMMIT, gcs_output_path=str(tmp_path / "out"), hf_urls_glob=["data/*"], cache_dir=cache)
    )
    assert meta["files"] == 1 and meta["commit"] == COMMIT


def test_missing_dataset_or_revision_names_what_is_missing(hf_cache, tmp_path):
    cache, _ = hf_cache
    with pytest.raises(HfDatasetNotCachedError, match=r"'tiny-org/absent'.*'main'.*huggingface-cli download"):
        download_hf(DownloadConfig("tiny-org/absent", "main", gcs_output_path=str(tmp_path / "a"), cache_dir=cache))
    with pytest.raises(HfDatasetNotCachedError, match=r"revision 'v9' of it is missing"):
        download_hf(DownloadConfig(REPO, "v9", gcs_output_path=str(tmp_path / "b"), cache_dir=cache))
    assert not os.path.exists(tmp_path / "a" / "manifest.json")


def test_default_download_is_marins_step(hf_cache, tmp_path):
    """Marin's ``experiments.defaults.default_download``: an ``InputName``, nothing versioned but what
    the script versions (Marin's hash), the files copied when it runs."""
    cache, _ = hf_cache
    assert OldNameDownloadConfig is DownloadConfig  # Marin's older module name
    plain = default_download("raw/tiny-web", REPO, "main", cache_dir=cache)
    pinned = default_download("raw/tiny-web", REPO, versioned(COMMIT), cache_dir=cache)
    expected_plain = marin_hash({"name": "raw/tiny-web", "config": {}, "dependencies": []})
    expected_pinned = marin_hash({"name": "raw/tiny-web", "config": {"revision": COMMIT}, "dependencies": []})
    assert (expected_plain, expected_pinned) == ("5a2e9a", "29920d")
    report = run_steps([plain.step, pinned.step], str(tmp_path / "prefix"), ExecutorOptions(max_concurrent=1))
    ran = {os.path.basename(o.output_path): o.action for o in report.outcomes}
    assert ran == {f"tiny-web-{expected_plain}": "ran", f"tiny-web-{expected_pinned}": "ran"}
    assert os.path.exists(tmp_path / "prefix" / "raw" / f"tiny-web-{expected_plain}" / "data" / "train.jsonl")
    again = run_steps([plain.step], str(tmp_path / "prefix"), ExecutorOptions(max_concurrent=1))
    assert [o.action for o in again.outcomes] == ["cached"]


def test_append_sha_to_path_writes_under_the_revision(hf_cache, tmp_path):
    cache, _ = hf_cache
    out = tmp_path / "out"
    download_hf(DownloadConfig(REPO, "main", gcs_output_path=str(out), append_sha_to_path=True, cache_dir=cache))
    assert (out / "main" / "data" / "train.jsonl").exists() and (out / "main" / "manifest.json").exists()


def test_a_parquet_dataset_from_the_cache_reads_without_an_id_column(tmp_path, monkeypatch):
    """Hub datasets are mostly parquet with a ``text`` column and no ``id``: every row is read,
    with an id from file and row, and its other columns (url, date) kept as provenance."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    repo = tmp_path / "hub" / "datasets--org--web-text"
    snapshot = repo / "snapshots" / COMMIT / "data"
    snapshot.mkdir(parents=True)
    table = pa.table({"text": ["first page text", "second page text"], "url": ["https://a/", "https://b/"]})
    pq.write_table(table.append_column("date", pa.array(["2024-01-02", "2024-01-03"])), snapshot / "train.parquet")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    out = str(tmp_path / "out")
    download_hf(DownloadConfig("org/web-text", "main", gcs_output_path=out, cache_dir=str(tmp_path / "hub")))
    raw = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir="", drop_id="hf", output_path=raw, drop_path=out))
    docs = docs_of(raw)
    assert meta["documents_out"] == 2 and meta["quarantined"] == 0
    second = docs["hf/data/train.parquet/2"]
    assert second["metadata"]["url"] == "https://b/" and second["created"] == "2024-01-03"
    assert second["metadata"]["content_type"] == "text/plain" and second["source"] == "org/web-text"
