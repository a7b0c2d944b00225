"""Drops in Dagster stay true without a code reload (real on-disk instance, real runs in process).

* code versions leave the drop set out: a new drop changes data versions and paths only, and the
  observed partition set marks the steps that read every drop as unsynced (Dagster's staleness);
* a scheduled job over steps that read every drop brings the missing inputs (a new drop's
  unit) along, records them as their own materializations and says why each unit ran;
* a materialization is an explicit request: a FAILED step re-runs without ``--force_run_failed``,
  while recording a command-line run never recomputes anything.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.partition_sets import SENSOR_NAME
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.dagster_bridge.step_run import RUN_ID_TAG
from marin_assets.dagster_bridge.unit_run import SOURCE_TAG
from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, StepGraph, output_path_of, this_output_path, versioned
from marin_assets.execution.declarations import Experiment, StepSchedule
from marin_assets.execution.status import read_status
from marin_assets.execution.step import this_partition
from marin_assets.execution.storage import atomic_write_text
from tests.dagster_private import stale_causes

SET = "drops"


@dataclass(frozen=True)
class DropConfig:
    output_path: str
    drop: str
    value: int = 1
    fail_while: str = ""  # the step fails while this file exists


@dataclass(frozen=True)
class CombineConfig:
    output_path: str
    inputs: Any = field(default_factory=list)


def per_drop(config: DropConfig) -> dict[str, int]:
    if config.fail_while and os.path.exists(config.fail_while):
        raise RuntimeError(f"planned failure of {config.drop}")
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": config.value}))
    return {"total": config.value}


def combine(config: CombineConfig) -> dict[str, int]:
    total = 0
    for path in config.inputs:
        with open(os.path.join(path, "value.json")) as handle:
            total += json.load(handle)["total"]
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": total}))
    return {"total": total}


def _steps(fail_while: str = "") -> dict[str, ExecutorStep]:
    drop = ExecutorStep(
        "t7/per_drop",
        per_drop,
        DropConfig(this_output_path(), this_partition(), versioned(1), fail_while),
        partitioned_by=SET,
    )
    every = ExecutorStep("t7/every_drop", combine, CombineConfig(this_output_path(), drop.partitions()))
    after = ExecutorStep("t7/after", combine, CombineConfig(this_output_path(), [output_path_of(every)]))
    return {"drop": drop, "every": every, "after": after}


def _definitions(steps: dict[str, ExecutorStep]) -> dg.Definitions:
    experiment = Experiment(
        "t7",
        [steps["after"]],
        partitions={SET: lambda prefix: []},  # Dagster's truth: the instance's partitions
        schedules=[StepSchedule("t7_nightly", "0 3 * * *", [steps["every"], steps["after"]])],
    )
    return build_definitions([experiment])


def _materializations(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str | None], dict]:
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        out[(mat.asset_key.to_user_string(), mat.partition)] = {k: v.value for k, v in mat.metadata.items()}
    return out


_SENSOR_CURSORS: dict[int, str | None] = {}


def _tick_partition_set_sensor(defs: dg.Definitions, instance: dg.DagsterInstance) -> int:
    """One tick of the ``partition_sets`` sensor, its observations stored as the daemon would."""
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    cursor = _SENSOR_CURSORS.get(id(instance))
    result = sensor(
        dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor, resources=defs.resources)
    )
    if not isinstance(result, dg.SensorResult):
        return 0
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    _SENSOR_CURSORS[id(instance)] = result.cursor
    return len(result.asset_events)


def _stale(defs: dg.Definitions, instance: dg.DagsterInstance, step_name: str) -> list[tuple[str, str]]:
    """Dagster's stale causes of an asset (what the UI's "Unsynced" shows), as (category, dependency)."""
    return stale_causes(defs, instance, asset_key_for(step_name))


@pytest.fixture
def env(prefix, dagster_home, monkeypatch) -> str:
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    return prefix


def test_code_versions_leave_the_drop_set_out(prefix):
    steps = _steps()
    versions = []
    for drops in (["d1"], ["d1", "d2"]):
        assets = build_step_assets(Experiment("t7", [steps["after"]], partitions={SET: drops}), prefix=prefix)
        versions.append({key: a.code_versions_by_key[key] for a in assets for key in a.keys})
    assert versions[0] == versions[1]
    # ... while the engine's versions (hash, path) do follow the drops.
    hashes = [
        StepGraph([steps["after"]], prefix, {SET: d}).resolved(steps["every"]).hash for d in (["d1"], ["d1", "d2"])
    ]
    assert hashes[0] != hashes[1]


def test_scheduled_job_brings_a_new_drop_along_and_says_why(env):
    steps = _steps()
    defs = _definitions(steps)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(SET, ["d1"])
    assert _tick_partition_set_sensor(defs, instance) == 1  # the daemon's sensor, running by default
    nightly = defs.resolve_job_def("t7_nightly_job")
    first = nightly.execute_in_process(instance=instance, tags={SOURCE_TAG: "schedule"})
    assert first.success
    mats = _materializations(first)
    # The missing input (d1 of the partitioned step) was computed first and recorded, with what a
    # materialization of its own records.
    brought = mats[("t7/per_drop", "d1")]
    assert brought["marin/cached"] is False and brought["marin/action"] == "ran (input of t7/every_drop)"
    assert brought["marin/browser"].endswith("/d1") and "/browse/" in brought["marin/browser"]
    assert brought["marin/code_version"] and brought["marin/version"] and brought["marin/seconds"] >= 0
    assert mats[("t7/every_drop", None)]["total"] == 1

    assert _tick_partition_set_sensor(defs, instance) == 0 and _stale(defs, instance, "t7/every_drop") == []

    instance.add_dynamic_partitions(SET, ["d2"])  # a new drop: no code reload
    # The partition-set sensor observes the new set: Dagster shows the consumer unsynced, and why.
    assert _tick_partition_set_sensor(defs, instance)
    assert _stale(defs, instance, "t7/every_drop") == [("DATA", "partition_sets/drops")]
    second = nightly.execute_in_process(instance=instance, tags={SOURCE_TAG: "schedule"})
    assert second.success
    mats = _materializations(second)
    assert ("t7/per_drop", "d1") not in mats  # SUCCESS already: not brought again
    assert mats[("t7/per_drop", "d2")]["marin/cached"] is False
    every = mats[("t7/every_drop", None)]
    assert every["total"] == 2 and every["marin/cached"] is False
    cause = "new partition d2 of t7/per_drop consumed by t7/every_drop"
    assert every["marin/reason"].startswith(cause)
    assert mats[("t7/after", None)]["marin/reason"].startswith(f"{cause} (via dependency t7/every_drop)")
    # Same code version before and after the drop; the data version (the engine's hash) moved.
    key = asset_key_for("t7/every_drop")
    events = instance.fetch_materializations(key, limit=2).records
    assert (
        events[0].asset_materialization.tags["dagster/data_version"]
        != events[1].asset_materialization.tags["dagster/data_version"]
    )
    assert (
        events[0].asset_materialization.tags["dagster/code_version"]
        == events[1].asset_materialization.tags["dagster/code_version"]
    )
    assert _stale(defs, instance, "t7/every_drop") == []  # in sync again


def test_materializing_is_an_explicit_request_that_reruns_a_failed_step(env, tmp_path):
    flag = tmp_path / "broken"
    flag.write_text("")
    steps = _steps(fail_while=str(flag))
    defs = _definitions(steps)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(SET, ["d1"])
    job = defs.resolve_job_def("t7_job")
    selection = [asset_key_for("t7/per_drop")]
    failed = job.execute_in_process(
        instance=instance, partition_key="d1", asset_selection=selection, raise_on_error=False
    )
    assert not failed.success
    path = StepGraph(list(steps.values()), env, {SET: ["d1"]}).resolved(steps["drop"]).partition_output_path("d1")
    assert read_status(path).status == "FAILED"

    flag.unlink()  # the cause is fixed
    # Recording a command-line run never recomputes: the FAILED step stays FAILED.
    recorded = job.execute_in_process(
        instance=instance,
        partition_key="d1",
        asset_selection=selection,
        tags={SOURCE_TAG: "executor_main", RUN_ID_TAG: "cli-run"},
        raise_on_error=False,
    )
    assert not recorded.success and read_status(path).status == "FAILED"
    # Re-executing from the UI (a plain run of the job) re-runs it -- no --force_run_failed needed.
    again = job.execute_in_process(instance=instance, partition_key="d1", asset_selection=selection)
    assert again.success
    assert read_status(path).status == "SUCCESS"
    meta = _materializations(again)[("t7/per_drop", "d1")]
    assert meta["marin/cached"] is False and meta["marin/reason"] == "previous attempt here is FAILED"


def test_every_asset_page_shows_where_its_output_lives(prefix):
    """The asset page's Storage reads ``dagster/uri`` from the definition only: steps whose path
    follows the drops show the glob of their versions' folders, which matches each version's path."""
    import fnmatch

    steps = _steps()
    assets = build_step_assets(Experiment("t7", [steps["after"]], partitions={SET: []}), prefix=prefix)
    uris = {key.to_user_string(): a.specs_by_key[key].metadata["dagster/uri"].value for a in assets for key in a.keys}
    assert set(uris) == {"t7/per_drop", "t7/every_drop", "t7/after"}
    for drops in (["d1"], ["d1", "d2"]):
        graph = StepGraph([steps["after"]], prefix, {SET: drops})
        for role in ("every", "after"):
            node = graph.resolved(steps[role])
            assert fnmatch.fnmatch(node.output_path, uris[node.name]), (node.output_path, uris[node.name])


def test_an_input_brought_along_that_fails_shows_its_real_cause_first(env, tmp_path):
    flag = tmp_path / "broken"
    flag.write_text("")
    steps = _steps(fail_while=str(flag))
    defs = _definitions(steps)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(SET, ["d1"])
    nightly = defs.resolve_job_def("t7_nightly_job")
    result = nightly.execute_in_process(instance=instance, tags={SOURCE_TAG: "schedule"}, raise_on_error=False)
    assert not result.success
    (failure, *_) = result.get_step_failure_events()
    first_line = failure.step_failure_data.error.message.strip().splitlines()[0]
    assert "RuntimeError: planned failure of d1" in first_line, first_line
    assert "t7/per_drop[d1]" in first_line  # which input failed
