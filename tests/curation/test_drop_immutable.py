"""Drops are immutable once processed, loudly (issue 30.4); a bug or storage error while validating a
drop is an error of the sensor tick, never a rejected drop (issue 32.2); steps merged for sharing
name and version are reported as Marin reports them (issue 30.3). Fast."""

from __future__ import annotations

import hashlib
import json
import logging
import os

import dagster as dg
import pytest

from marin_assets.dagster_bridge.landing_assets import (
    CHANGED_CHECK,
    STATUS_CHANGED,
    build_landing_status_sensor,
    drop_rows,
    landing_checks,
    landing_key,
    landing_zone_asset,
    landing_zone_checks,
)
from marin_assets.dagster_bridge.landing_sensor import LandingScanError, build_landing_sensor
from marin_assets.execution.step import ExecutorStep, this_output_path, versioned
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing import zone
from marin_assets.landing.zone import STATUS_VALID, LandingDrops, validate_drop, write_manifest
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_resources.dagster_resources import MarinStorageResource
from tests.execution.sample_steps import WriteConfig, write_value

SOURCE = "web"
DROPS = LandingDrops(f"landing/{SOURCE}")
KEY = dg.AssetKey(["web", "consolidated"])
drops_def = dg.DynamicPartitionsDefinition(name=SOURCE)


@dg.asset(key=KEY, partitions_def=drops_def)
def consolidated() -> None:  # a stand-in drop-job asset: the sensors only read its materializations
    return None


@pytest.fixture
def instance(dagster_home):
    with dg.DagsterInstance.get() as inst:
        yield inst


def _drop(prefix: str, drop: str) -> str:
    write_drop(prefix, drop, SampleConfig(docs_per_drop=5), SOURCE)
    return os.path.join(prefix, "landing", SOURCE, drop)


def _status_tick(sensor, instance, prefix, cursor=None, handler=None):
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"marin_storage": MarinStorageResource(prefix=prefix)}
    )
    if handler is not None:  # what the tick logs (the UI shows it in the tick's log)
        context.log.addHandler(handler)
    return sensor(context)


def _rewrite(drop_path: str) -> None:
    """Re-upload the drop with other content (a valid drop again: new bytes, new manifest)."""
    data = b'{"id": "new-1", "text": "content uploaded after the drop was processed"}\n'
    with open(os.path.join(drop_path, "new.jsonl"), "wb") as handle:
        handle.write(data)
    with open(os.path.join(drop_path, "manifest.json")) as handle:
        manifest = json.load(handle)
    manifest["files"] = [{"path": "new.jsonl", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    with open(os.path.join(drop_path, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)


def test_processed_drop_whose_files_change_is_flagged(prefix, instance, caplog):
    drop = _drop(prefix, "drop-001")
    _drop(prefix, "drop-002")
    sensor = build_landing_status_sensor([(DROPS, SOURCE, [KEY])])
    first = _status_tick(sensor, instance, prefix)
    check = [e for e in first.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
    assert [(c.check_name, c.passed) for c in check] == [(CHANGED_CHECK, True), ("no_failed_drops", True)]
    for key in ("drop-001", "drop-002"):  # both drops' runs succeeded
        instance.report_runless_asset_event(dg.AssetMaterialization(KEY, partition=key))
    processed = _status_tick(sensor, instance, prefix, first.cursor)
    rows = processed.asset_events[0].metadata["drops"].value.records
    assert [r.data["status"] for r in rows] == ["processed", "processed"]

    os.utime(os.path.join(drop, "manifest.json"))  # touched, same bytes: not a change
    same = _status_tick(sensor, instance, prefix, processed.cursor)
    assert isinstance(same, dg.SkipReason)

    _rewrite(drop)
    caplog.set_level(logging.WARNING)
    flagged = _status_tick(sensor, instance, prefix, processed.cursor, caplog.handler)
    observation = next(e for e in flagged.asset_events if isinstance(e, dg.AssetObservation))
    rows = {r.data["drop"]: r.data for r in observation.metadata["drops"].value.records}
    assert rows["drop-001"]["status"] == STATUS_CHANGED and "new drop id" in rows["drop-001"]["reason"]
    assert rows["drop-002"]["status"] == "processed"
    assert observation.metadata[f"count/{STATUS_CHANGED}"].value == 1
    checks = {e.check_name: e.passed for e in flagged.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert checks == {CHANGED_CHECK: False, "no_failed_drops": True}
    assert any("drop-001" in r.getMessage() and "changed after processing" in r.getMessage() for r in caplog.records)

    # The run-requesting sensor launches nothing for it: its outputs stay as they were processed.
    runs = build_landing_sensor(dg.AssetSelection.assets(consolidated), drops_def, source=SOURCE, processed_keys=[KEY])
    context = dg.build_sensor_context(
        instance=instance, resources={"marin_storage": MarinStorageResource(prefix=prefix)}
    )
    result = runs(context)
    assert not result.run_requests  # processed (every drop-job asset materialized), new bytes or not

    # The landing check, executed on its own, reads the latest recorded table and fails.
    instance.report_runless_asset_event(dg.AssetObservation(landing_key(SOURCE), metadata=dict(observation.metadata)))
    executed = dg.materialize(
        [consolidated, landing_zone_asset(DROPS, SOURCE, [KEY]), *landing_zone_checks(DROPS)],
        instance=instance,
        resources={"marin_storage": MarinStorageResource(prefix=prefix)},
        selection=dg.AssetSelection.all_asset_checks(),
        raise_on_error=False,
    )
    evaluations = executed.get_asset_check_evaluations()
    assert sorted((e.check_name, e.passed) for e in evaluations) == [(CHANGED_CHECK, False), ("no_failed_drops", True)]


def test_a_bug_while_validating_is_a_tick_error_never_a_rejected_drop(prefix, instance, monkeypatch):
    drop = _drop(prefix, "drop-001")

    def broken(fs, path):
        raise RuntimeError("a bug in the checksum code")

    monkeypatch.setattr(zone, "_sha256_of", broken)
    with pytest.raises(RuntimeError, match="a bug in the checksum code"):
        validate_drop(drop, "drop-001")
    sensor = build_landing_sensor(dg.AssetSelection.assets(consolidated), drops_def, source=SOURCE)
    resources = {"marin_storage": MarinStorageResource(prefix=prefix)}
    with pytest.raises(LandingScanError, match="a bug in the checksum code"):
        sensor(dg.build_sensor_context(instance=instance, resources=resources))
    monkeypatch.undo()  # fixed: the next tick (same cursor: none) requests the run
    result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert [r.partition_key for r in result.run_requests] == ["drop-001"]
    assert validate_drop(drop, "drop-001")[0] == STATUS_VALID


def test_manifest_that_is_a_folder_is_rejected_with_its_reason(prefix):
    drop = os.path.join(prefix, "landing", SOURCE, "drop-001")
    os.makedirs(os.path.join(drop, "manifest.json"))
    status, reason, _ = validate_drop(drop, "drop-001")
    assert status == "rejected" and "folder" in reason


def test_steps_merged_for_the_same_version_are_reported_as_marin_does(prefix, caplog):
    first = ExecutorStep("filters/q", write_value, WriteConfig(this_output_path(), versioned(1)))
    second = ExecutorStep("filters/q", write_value, WriteConfig(this_output_path(), versioned(1), note="other"))
    distinct = ExecutorStep("filters/q", write_value, WriteConfig(this_output_path(), versioned(2)))
    caplog.set_level(logging.WARNING, logger="marin_assets.execution.versioning")
    graph = StepGraph([first, second, distinct], prefix)
    assert graph.resolved(first) is graph.resolved(second) and graph.resolved(distinct) is not graph.resolved(first)
    warnings = [r.getMessage() for r in caplog.records if "same version" in r.getMessage()]
    assert warnings == [
        "Multiple `ExecutorStep`s (named filters/q) have the same version; try to instantiate only once."
    ]


def test_a_file_nothing_can_be_read_of_is_rejected_with_a_one_line_reason_in_the_drops_table(prefix, instance):
    drop = _drop(prefix, "drop-001")
    with open(os.path.join(drop, "junk.bin"), "wb") as handle:
        handle.write(bytes(range(256)) * 4)  # no supported format
    write_manifest(drop, SOURCE)
    meta = run_raw(RawConfig(DROPS.folder(prefix), "drop-001", os.path.join(prefix, "raw-out")))
    assert meta["documents_out"] == 5 and meta["rejected_files_count"] == 1
    (line,) = meta["rejected_files"]
    assert line.startswith("junk.bin: content is none of") and "\n" not in line
    # The drop's run reports it; the drops table shows it beside the processed drop.
    instance.report_runless_asset_event(
        dg.AssetMaterialization(KEY, partition="drop-001", metadata={"rejected_files": dg.MetadataValue.json([line])})
    )
    for state in (None, {}):
        rows = drop_rows(instance, prefix, DROPS, [KEY], verify=False, state=state)
        assert [(r["status"], r["reason"]) for r in rows] == [("processed", f"file rejected: {line}")]


def test_a_failed_drop_fails_the_no_failed_drops_landing_check():
    rows = [
        {"drop": "drop-001", "status": "processed", "reason": "", "files": 1, "path": "p"},
        {"drop": "drop-002", "status": "failed", "reason": "run abc failed", "files": 1, "path": "p"},
    ]
    checks = {e.check_name: e for e in landing_checks(SOURCE, rows)}
    assert checks["no_failed_drops"].passed is False and checks[CHANGED_CHECK].passed is True
    assert "drop-002: run abc failed" in checks["no_failed_drops"].metadata["drops"].value


def test_an_explicit_reprocess_changes_the_version_and_the_default_does_not(prefix):
    from marin_assets.experiments.curation_pipeline import curation_steps

    def hashes(**kwargs):
        steps = curation_steps(f"landing/{SOURCE}", **kwargs)
        graph = StepGraph(list(steps.values()), prefix)
        return {role: graph.resolved(step).hash for role, step in steps.items()}

    default, again, reprocess = hashes(), hashes(revision=0), hashes(revision=1)
    assert default == again
    changed = {role for role in default if default[role] != reprocess[role]}
    assert changed == {"raw", "text", "quality", "dedup", "consolidated"}  # every per-drop step; not the classifier
