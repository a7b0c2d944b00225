"""The landing sensor with a real on-disk Dagster instance."""

from __future__ import annotations

import hashlib
import json
import os

import dagster as dg
import pytest

from marin_assets.dagster_bridge import landing_sensor
from marin_assets.dagster_bridge.landing_sensor import LandingScanError, build_landing_sensor, evaluate_landing
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.drop_ids import expand_ids

SOURCE = "sample-html"
drops_def = dg.DynamicPartitionsDefinition(name="drops")


@dg.asset(partitions_def=drops_def)
def curated(context) -> None:  # a stand-in target: the sensor only needs something partitioned
    context.log.info(context.partition_key)


@pytest.fixture
def instance(dagster_home):
    with dg.DagsterInstance.get() as inst:
        yield inst


@pytest.fixture
def zone(tmp_path):
    return str(tmp_path / "zone")


def _sensor(zone):
    return build_landing_sensor(dg.AssetSelection.assets(curated), drops_def, lambda: zone, source=SOURCE)


def _tick(sensor, instance, cursor=None):
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    # What the daemon does with the result: apply partition requests, keep the cursor.
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return result


class _Log:
    def __init__(self):
        self.warnings = []

    def warning(self, msg):
        self.warnings.append(msg)

    def debug(self, msg):
        pass


def _drop(zone, drop_id, docs=10):
    write_drop(zone, drop_id, SampleConfig(docs_per_drop=docs), SOURCE)


def test_new_drop_adds_partition_and_requests_run(zone, instance):
    sensor = _sensor(zone)
    assert sensor.name == "landing_sensor_sample_html"
    empty = _tick(sensor, instance)
    assert not empty.run_requests
    _drop(zone, "drop-001")
    _drop(zone, "drop-002")
    result = _tick(sensor, instance, empty.cursor)
    assert [r.partition_key for r in result.run_requests] == ["drop-001", "drop-002"]
    assert len({r.run_key for r in result.run_requests}) == 2
    assert result.run_requests[0].tags["marin/drop"] == "drop-001"
    [add] = result.dynamic_partitions_requests
    assert list(add.partition_keys) == ["drop-001", "drop-002"]
    assert instance.get_dynamic_partitions("drops") == ["drop-001", "drop-002"]
    # Same drops again: no new run, no new partition.
    again = _tick(sensor, instance, result.cursor)
    assert not again.run_requests and not again.dynamic_partitions_requests
    # A later drop: only it.
    _drop(zone, "drop-003")
    third = _tick(sensor, instance, again.cursor)
    assert [r.partition_key for r in third.run_requests] == ["drop-003"]


def test_existing_partition_not_added_twice(zone, instance):
    instance.add_dynamic_partitions("drops", ["drop-001"])
    _drop(zone, "drop-001")
    result = _tick(_sensor(zone), instance)
    assert [r.partition_key for r in result.run_requests] == ["drop-001"]
    assert not result.dynamic_partitions_requests


def test_incomplete_drop_untouched_until_complete(zone, instance):
    _drop(zone, "drop-001")
    manifest = os.path.join(zone, "landing", SOURCE, "drop-001", "manifest.json")
    held = manifest + ".held"
    os.rename(manifest, held)
    sensor = _sensor(zone)
    first = _tick(sensor, instance)
    assert not first.run_requests and not instance.get_dynamic_partitions("drops")
    os.rename(held, manifest)
    second = _tick(sensor, instance, first.cursor)
    assert [r.partition_key for r in second.run_requests] == ["drop-001"]


def test_bad_drops_rejected_without_blocking_others(zone, instance):
    _drop(zone, "drop-001")
    _drop(zone, "drop-002")
    # Bad checksum in drop-002.
    manifest_path = os.path.join(zone, "landing", SOURCE, "drop-002", "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    manifest["files"][0]["sha256"] = "0" * 64
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    # Unsafe names and a garbage manifest.
    for name in ("bad\x1bname", "x" * 140, "drop-009"):
        os.makedirs(os.path.join(zone, "landing", SOURCE, name))
        with open(os.path.join(zone, "landing", SOURCE, name, "manifest.json"), "wb") as handle:
            handle.write(b"\x00\xff garbage")
    sensor = _sensor(zone)
    result = _tick(sensor, instance)
    assert [r.partition_key for r in result.run_requests] == ["drop-001"]
    assert instance.get_dynamic_partitions("drops") == ["drop-001"]
    state = json.loads(result.cursor)
    assert "sha256" in state["rejected"]["drop-002"]
    assert "unsafe" in state["rejected"]["bad\x1bname"]
    assert set(state["rejected"]) == {"drop-002", "bad\x1bname", "x" * 140, "drop-009"}
    again = _tick(sensor, instance, result.cursor)
    assert not again.run_requests
    # Rejections are logged once (with the reason), not on every tick.
    log = _Log()
    _, cursor, messages = evaluate_landing(zone, SOURCE, None, lambda key: False, log)
    assert any("drop-002" in m and "sha256" in m for m in log.warnings) and len(messages) == 4
    _, _, messages = evaluate_landing(zone, SOURCE, cursor, lambda key: False, (log := _Log()))
    assert not messages and not log.warnings


def test_missing_landing_zone_and_bad_cursor(zone, instance):
    sensor = _sensor(zone)
    result = _tick(sensor, instance, cursor="{not json")
    assert not result.run_requests
    broken = build_landing_sensor(dg.AssetSelection.assets(curated), drops_def, lambda: 1 / 0, source=SOURCE)
    # Not a property of any drop: the tick fails (visible, retried by the next tick), nothing is rejected.
    with pytest.raises(LandingScanError, match="ZeroDivisionError"):
        broken(dg.build_sensor_context(instance=instance))


def test_sensor_loads_in_definitions(zone):
    defs = dg.Definitions(assets=[curated], sensors=[_sensor(zone)])
    assert defs.get_sensor_def("landing_sensor_sample_html")


def test_checksum_rejection_cached_until_drop_content_changes(zone):
    _drop(zone, "drop-001")
    drop_dir = os.path.join(zone, "landing", SOURCE, "drop-001")
    manifest_path = os.path.join(drop_dir, "manifest.json")
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    manifest["files"][0]["sha256"] = "0" * 64
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    log = _Log()
    new, cursor, messages = evaluate_landing(zone, SOURCE, None, lambda key: False, log)
    assert not new and len(messages) == 1
    state = json.loads(cursor)
    first_reason = state["rejected"]["drop-001"]
    assert "sha256" in first_reason
    assert state["checksum_rejected"]["drop-001"]["reason"] == first_reason

    # Nothing changed: not hashed again (same cache entry, nothing new logged).
    new, cursor_same, messages = evaluate_landing(zone, SOURCE, cursor, lambda key: False, (log := _Log()))
    assert not new and not messages and not log.warnings and json.loads(cursor_same) == state

    # The data behind the unchanged manifest changes (same size, other bytes, later mtime), as when
    # an upload was still running at the first check: the drop is verified again -- the reason
    # quotes the new actual sha256.
    data_path = os.path.join(drop_dir, manifest["files"][0]["path"])
    with open(data_path, "rb") as handle:
        data = handle.read()
    with open(data_path, "wb") as handle:
        handle.write(data[:-1] + bytes([data[-1] ^ 0xFF]))
    stat = os.stat(data_path)
    os.utime(data_path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    new, cursor2, messages = evaluate_landing(zone, SOURCE, cursor, lambda key: False, (log := _Log()))
    second = json.loads(cursor2)
    assert not new and len(messages) == 1 and second["rejected"]["drop-001"] != first_reason
    assert second["checksum_rejected"]["drop-001"]["manifest"] != state["checksum_rejected"]["drop-001"]["manifest"]

    # A rewritten manifest is verified again too.
    manifest["created_at"] = "2030-01-01T00:00:00Z"
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    new, cursor3, _ = evaluate_landing(zone, SOURCE, cursor2, lambda key: False, _Log())
    third = json.loads(cursor3)
    assert not new
    assert third["checksum_rejected"]["drop-001"]["manifest"] != second["checksum_rejected"]["drop-001"]["manifest"]

    # Fixing the manifest's checksum makes the drop valid: picked up, cache entry dropped.
    with open(data_path, "rb") as handle:
        manifest["files"][0]["sha256"] = hashlib.sha256(handle.read()).hexdigest()
    with open(manifest_path, "w") as handle:
        json.dump(manifest, handle)
    new, cursor4, _ = evaluate_landing(zone, SOURCE, cursor3, lambda key: False, _Log())
    assert [key for key, _, _ in new] == ["drop-001"]
    fourth = json.loads(cursor4)
    assert "drop-001" not in fourth["checksum_rejected"] and "drop-001" not in fourth["rejected"]
    assert fourth["processed"] == ["drop-001"]


def test_cursor_without_checksum_cache_still_loads(zone):
    _drop(zone, "drop-001")
    old_cursor = json.dumps({"seen": {}, "rejected": {"gone": "old reason"}})
    new, cursor, _ = evaluate_landing(zone, SOURCE, old_cursor, lambda key: False, _Log())
    assert [key for key, _, _ in new] == ["drop-001"]
    assert json.loads(cursor)["checksum_rejected"] == {}
    broken = json.dumps({"seen": [], "rejected": None, "checksum_rejected": {"x": "not an object"}})
    new, cursor, _ = evaluate_landing(zone, SOURCE, broken, lambda key: False, _Log())
    assert [key for key, _, _ in new] == ["drop-001"]


def _in_other_thread(fn) -> None:
    """Writes from another thread: fsspec gives each thread its own gcsfs instance (and cache)."""
    import threading

    thread = threading.Thread(target=fn)
    thread.start()
    thread.join()


def test_long_lived_thread_keeps_seeing_new_gs_drops_and_rejections(gcs_prefix, instance):
    """One thread ticks the sensor on a gs:// landing zone (as the code server's reused threads do):
    drops that arrive later are seen on the next tick, and a rejected drop is reported on every tick."""
    from marin_assets.execution.storage import atomic_write_bytes, join_path, read_bytes

    sensor = _sensor(gcs_prefix)
    _in_other_thread(lambda: _drop(gcs_prefix, "drop-001"))
    first = _tick(sensor, instance)
    assert [r.partition_key for r in first.run_requests] == ["drop-001"]
    cursor = first.cursor
    empty = _tick(sensor, instance, cursor)
    assert not empty.run_requests
    _in_other_thread(lambda: _drop(gcs_prefix, "drop-002"))
    second = _tick(sensor, instance, empty.cursor)
    assert [r.partition_key for r in second.run_requests] == ["drop-002"]

    def bad_drop() -> None:
        _drop(gcs_prefix, "drop-003")
        manifest_path = join_path(gcs_prefix, f"landing/{SOURCE}/drop-003/manifest.json")
        manifest = json.loads(read_bytes(manifest_path))
        manifest["files"][0]["sha256"] = "0" * 64
        atomic_write_bytes(manifest_path, json.dumps(manifest).encode())

    _in_other_thread(bad_drop)
    _in_other_thread(lambda: _drop(gcs_prefix, "drop-004"))
    third = _tick(sensor, instance, second.cursor)
    assert [r.partition_key for r in third.run_requests] == ["drop-004"]
    cursor = third.cursor
    for _ in range(3):  # every later tick still names the rejected drop and why
        tick = _tick(sensor, instance, cursor)
        assert not tick.run_requests
        assert "drop-003" in (tick.skip_reason.skip_message or "") and "sha256" in tick.skip_reason.skip_message
        assert "drop-003" in json.loads(tick.cursor)["rejected"]
        cursor = tick.cursor
    assert instance.get_dynamic_partitions("drops") == ["drop-001", "drop-002", "drop-004"]


def test_steady_tick_reads_nothing_of_processed_drops(zone, monkeypatch):
    """O(new drops): after the first tick, processed drops cost only their name in one listing --
    not a manifest read, not a stat. A processed drop's manifest turned to garbage goes unnoticed
    (drops are immutable), and a new drop is read, verified and requested alone."""
    for i in range(1, 6):
        _drop(zone, f"drop-{i:03d}")
    first, cursor, _ = evaluate_landing(zone, SOURCE, None, lambda key: False, _Log())
    assert [key for key, _, _ in first] == [f"drop-{i:03d}" for i in range(1, 6)]
    assert json.loads(cursor)["processed"] == ["drop-{001..005}"]  # compact, whatever the count
    with open(os.path.join(zone, "landing", SOURCE, "drop-002", "manifest.json"), "wb") as handle:
        handle.write(b"garbage")
    validated: list[tuple[str, bool]] = []
    real = landing_sensor.validate_drop

    def counting(path, drop_id, verify_checksums=True):
        validated.append((drop_id, verify_checksums))
        return real(path, drop_id, verify_checksums)

    monkeypatch.setattr(landing_sensor, "validate_drop", counting)
    steady, cursor, messages = evaluate_landing(zone, SOURCE, cursor, lambda key: False, (log := _Log()))
    assert not steady and not messages and not log.warnings and validated == []
    _drop(zone, "drop-006")
    later, cursor, _ = evaluate_landing(zone, SOURCE, cursor, lambda key: False, _Log())
    assert [key for key, _, _ in later] == ["drop-006"]
    assert validated == [("drop-006", False), ("drop-006", True)]
    assert expand_ids(json.loads(cursor)["processed"]) == {f"drop-{i:03d}" for i in range(1, 7)}


def test_fresh_sensor_marks_drops_whose_units_succeeded_as_processed(zone, instance):
    """A sensor enabled on a zone whose drops already ran launches no catch-up run for them: it
    adds their partitions and remembers them; only the drop whose units did not all succeed runs."""
    for drop in ("drop-001", "drop-002", "drop-003"):
        _drop(zone, drop)
    for drop in ("drop-001", "drop-002"):
        instance.report_runless_asset_event(dg.AssetMaterialization(curated.key, partition=drop))
    sensor = build_landing_sensor(
        dg.AssetSelection.assets(curated), drops_def, lambda: zone, source=SOURCE, processed_keys=[curated.key]
    )
    first = _tick(sensor, instance)
    assert [r.partition_key for r in first.run_requests] == ["drop-003"]
    assert sorted(instance.get_dynamic_partitions("drops")) == ["drop-001", "drop-002", "drop-003"]
    assert json.loads(first.cursor)["processed"] == ["drop-{001..003}"]
    assert not _tick(sensor, instance, first.cursor).run_requests


def test_cursor_of_the_older_format_keeps_its_drops_processed(zone):
    _drop(zone, "drop-001")
    _drop(zone, "drop-002")
    old = json.dumps({"seen": {"drop-001": "abc"}, "rejected": {}, "checksum_rejected": {}})
    new, cursor, _ = evaluate_landing(zone, SOURCE, old, lambda key: False, _Log())
    assert [key for key, _, _ in new] == ["drop-002"]
    assert json.loads(cursor)["processed"] == ["drop-{001..002}"] and "seen" not in json.loads(cursor)
