"""Drops that try to make the stages read outside the landing zone, and rejections that must stay
visible: symlinks anywhere in a drop are rejected (never read), every sensor tick reports them."""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest

from marin_assets.dagster_bridge.landing_sensor import build_landing_sensor, evaluate_landing
from marin_assets.landing.zone import STATUS_REJECTED, STATUS_VALID, scan_landing_zone, validate_drop
from marin_assets.transform.raw.process import RawConfig, run_raw

from .test_inputs import write_drop_files

SECRET = "root:x:0:0:secret-line-outside-the-zone"


class _Log:
    def __init__(self):
        self.warnings, self.infos = [], []

    def warning(self, msg):
        self.warnings.append(msg)

    def info(self, msg):
        self.infos.append(msg)

    def debug(self, msg):
        pass


@pytest.fixture
def zone(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd.jsonl").write_text(json.dumps({"id": "leak", "text": SECRET}) + "\n")
    source = tmp_path / "landing" / "src"
    source.mkdir(parents=True)
    return tmp_path, source, outside


def _good(drop_dir) -> None:
    write_drop_files(str(drop_dir), {"part.jsonl": b'{"id": "a", "text": "<p>a</p>"}\n'})


def _relist_with(drop_dir, name) -> None:
    """Rewrite the manifest so that it lists ``name`` too, with the checksum of what it points at."""
    import hashlib

    manifest_path = os.path.join(drop_dir, "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    with open(os.path.join(drop_dir, name), "rb") as handle:  # the test itself follows the link
        data = handle.read()
    manifest["files"].append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)


def test_symlinked_data_file_is_rejected_and_never_read(zone):
    tmp_path, source, outside = zone
    drop = source / "drop-1"
    _good(drop)
    os.symlink(outside / "passwd.jsonl", drop / "leak.jsonl")
    _relist_with(drop, "leak.jsonl")  # checksums and sizes are right: only the link is wrong
    status, reason, _ = validate_drop(str(drop), "drop-1")
    assert status == STATUS_REJECTED and "leak.jsonl is a symlink" in reason
    out = tmp_path / "raw"
    with pytest.raises(RuntimeError, match="leak.jsonl is a symlink"):
        run_raw(RawConfig(landing_dir=str(source), drop_id="drop-1", output_path=str(out)))
    written = [p for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert not any(SECRET in p.read_text(errors="ignore") for p in written)


def test_unlisted_symlink_and_symlinked_subfolder_are_rejected(zone):
    _, source, outside = zone
    drop = source / "drop-1"
    _good(drop)
    os.symlink(outside, drop / "more")  # a folder link, listed nowhere
    status, reason, _ = validate_drop(str(drop), "drop-1")
    assert status == STATUS_REJECTED and "more is a symlink" in reason


def test_symlinked_manifest_is_rejected(zone):
    _, source, outside = zone
    real = source / "drop-1"
    _good(real)
    (outside / "manifest.json").write_text((real / "manifest.json").read_text())
    os.remove(real / "manifest.json")
    os.symlink(outside / "manifest.json", real / "manifest.json")
    status, reason, _ = validate_drop(str(real), "drop-1")
    assert status == STATUS_REJECTED and "manifest.json is a symlink" in reason


def test_symlinked_drop_folder_is_reported_not_invisible(zone, tmp_path):
    _, source, outside = zone
    elsewhere = outside / "drop-2"
    _good(elsewhere)
    os.symlink(elsewhere, source / "drop-2")
    _good(source / "drop-1")
    found = {d.drop_id: d for d in scan_landing_zone(str(tmp_path), "src")}
    assert found["drop-1"].status == STATUS_VALID
    assert found["drop-2"].status == STATUS_REJECTED and "drop folder itself is a symlink" in found["drop-2"].reason
    new, _, messages = evaluate_landing(str(tmp_path), "src", None, lambda key: False, _Log())
    assert [key for key, _, _ in new] == ["drop-1"]
    assert any("drop-2" in m and "symlink" in m for m in messages)


def test_rejection_is_visible_on_every_tick(zone, tmp_path, dagster_home):
    _, source, outside = zone
    drop = source / "drop-1"
    _good(drop)
    os.symlink(outside / "passwd.jsonl", drop / "leak.jsonl")
    drops_def = dg.DynamicPartitionsDefinition(name="drops")

    @dg.asset(partitions_def=drops_def)
    def curated(context) -> None:
        context.log.info(context.partition_key)

    sensor = build_landing_sensor(dg.AssetSelection.assets(curated), drops_def, lambda: str(tmp_path), source="src")
    with dg.DagsterInstance.get() as instance:
        cursor = None
        for _ in range(3):  # the same rejection, tick after tick
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            assert not result.run_requests
            assert result.skip_reason is not None
            assert "drop-1" in result.skip_reason.skip_message and "symlink" in result.skip_reason.skip_message
            cursor = result.cursor
        # Fixed: the link removed, the drop is picked up and no rejection is reported any more.
        os.remove(drop / "leak.jsonl")
        result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
        assert [r.partition_key for r in result.run_requests] == ["drop-1"] and result.skip_reason is None
