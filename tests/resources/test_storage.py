"""StorageConfig: prefix resolution, validation, fsspec access (local, memory:// and gs://)."""

from __future__ import annotations

import os

import fsspec
import pytest

from marin_resources.storage import StorageConfig, normalize_prefix


def test_default_prefix_is_absolute_data(monkeypatch, tmp_path):
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    monkeypatch.chdir(tmp_path)
    assert StorageConfig().root == str(tmp_path / "data")
    monkeypatch.setenv("MARIN_PREFIX", "rel/out/")
    assert StorageConfig().root == str(tmp_path / "rel" / "out")
    assert StorageConfig(prefix="file://" + str(tmp_path / "x")).root == str(tmp_path / "x")


def test_one_default_prefix_for_the_engine_and_the_resources(monkeypatch, tmp_path):
    import importlib

    from marin_resources.storage import default_prefix

    executor_main = importlib.import_module("marin_assets.execution.executor_main")
    assert executor_main.default_prefix is default_prefix
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MARIN_PREFIX", "file://" + str(tmp_path / "out"))
    assert default_prefix() == StorageConfig().root == str(tmp_path / "out")


def test_remote_prefix_kept_and_validated():
    assert normalize_prefix("gs://bucket/marin/") == "gs://bucket/marin"
    assert StorageConfig(prefix="gs://bucket/marin").protocol == "gs"
    with pytest.raises(ValueError, match="unknown storage protocol"):
        normalize_prefix("nosuchproto://x")
    with pytest.raises(ValueError, match="names no bucket"):
        normalize_prefix("gs://")
    with pytest.raises(ValueError, match="empty"):
        normalize_prefix("  ")


def test_local_read_write(tmp_path):
    storage = StorageConfig(prefix=str(tmp_path / "root"))
    assert storage.ensure_root() == str(tmp_path / "root")
    with storage.open("step-abc123/out.txt", "w") as handle:
        handle.write("hello")
    assert storage.exists("step-abc123", "out.txt")
    assert (tmp_path / "root" / "step-abc123" / "out.txt").read_text() == "hello"
    assert storage.relative(storage.url("step-abc123/out.txt")) == "step-abc123/out.txt"
    assert storage.relative(str(tmp_path / "elsewhere")) is None
    assert storage.describe() == {"prefix": str(tmp_path / "root"), "protocol": "file", "local": True}


def test_memory_filesystem_round_trip():
    storage = StorageConfig(prefix="memory://marin-test")
    storage.ensure_root()
    with storage.open("a/b.json", "w") as handle:
        handle.write("{}")
    assert storage.exists("a/b.json")
    assert storage.url("a", "b.json") == "memory://marin-test/a/b.json"
    assert not storage.is_local
    assert not os.path.exists("marin-test")


def test_object_store_listing_is_never_stale(gcs_prefix):
    """The resource's filesystem lists what the store holds now, even in a thread that listed before."""
    storage = StorageConfig(prefix=gcs_prefix)
    fs = storage.filesystem()
    folder = storage.url("landing/web")
    fs.pipe_file(f"{folder}/drop-001/manifest.json", b"{}")
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(folder)] == ["drop-001"]
    # Another writer (a new fsspec instance would not share this one's cache either way).
    other = fsspec.filesystem("gs", skip_instance_cache=True)
    other.pipe_file(f"{folder}/drop-002/manifest.json", b"{}")
    assert [p.rsplit("/", 1)[-1] for p in storage.filesystem().ls(folder)] == ["drop-001", "drop-002"]
