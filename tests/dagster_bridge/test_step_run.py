"""A Dagster run of a group schedules as ``executor_main`` does (real on-disk instance, real runs).

* independent steps of one selection run at the same time (their recorded intervals overlap);
* ``Experiment(max_concurrent=1)`` (or the run tag ``marin/max_concurrent``) runs them one by one;
* a failing step stops only its descendants (DEP_FAILED, not materialized, never "failed"), every
  other step is materialized, and the run fails naming the failed step with its cause first;
* each step's lines in the run's log start with its name (one step's log lines, filtered);
* a run of the location's jobs (with their own executor, as a run worker runs them) runs the op in
  the run's process: no step process that loads the location again.
"""

from __future__ import annotations

import logging
import os
import re

import dagster as dg
import pytest

from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.dagster_bridge.step_run import MAX_CONCURRENT_TAG
from marin_assets.execution import StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.status import read_status
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from tests.dagster_bridge.run_steps import (
    FAMILY_STATUS_AFTER_BAD_FAILED,
    failing_family,
    independent_steps,
    interval_of,
)


def _resources(prefix: str) -> dict:
    return {"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()}


def _materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        e.event_specific_data.materialization.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
    }


def _log_lines(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [r.event_log_entry.user_message for r in instance.get_records_for_run(run_id).records]


def test_independent_steps_of_one_run_run_together(prefix, dagster_home):
    steps = independent_steps(4, 1.0)
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        build_step_assets(Experiment("naps", steps), prefix=prefix), instance=instance, resources=_resources(prefix)
    )
    assert result.success
    graph = StepGraph(steps, prefix)
    intervals = [interval_of(graph.resolved(s).output_path) for s in steps]
    # Every step started before any of them ended: they ran at the same time, not in turn.
    assert max(start for start, _ in intervals) < min(end for _, end in intervals), intervals
    assert _materialized(result) == {f"nap/s{i:02d}" for i in range(4)}
    lines = _log_lines(instance, result.run_id)
    # Each step's start and end is a line of its own, starting with the step's name.
    for i in range(4):
        mine = [line for line in lines if line.startswith(f"nap/s{i:02d}:")]
        assert any("started" in line for line in mine) and any("done in" in line for line in mine), mine


@pytest.mark.parametrize("limit_by", ["experiment", "run tag"])
def test_a_concurrency_limit_of_one_runs_steps_in_turn(prefix, dagster_home, limit_by):
    steps = independent_steps(3, 0.5, name=f"turn_{limit_by.replace(' ', '_')}")
    experiment = Experiment("turns", steps, max_concurrent=1 if limit_by == "experiment" else None)
    tags = {MAX_CONCURRENT_TAG: "1"} if limit_by == "run tag" else None
    result = dg.materialize(
        build_step_assets(experiment, prefix=prefix),
        instance=dg.DagsterInstance.get(),
        resources=_resources(prefix),
        tags=tags,
    )
    assert result.success
    graph = StepGraph(steps, prefix)
    intervals = sorted(interval_of(graph.resolved(s).output_path) for s in steps)
    assert all(intervals[i][1] <= intervals[i + 1][0] for i in range(len(intervals) - 1)), intervals


def test_a_failure_stops_only_its_descendants_and_names_its_cause_first(prefix, dagster_home, tmp_path, caplog):
    flag = tmp_path / "fail"
    flag.write_text("fail")
    family = failing_family(str(flag))
    instance = dg.DagsterInstance.get()
    with caplog.at_level(logging.INFO, logger="marin.executor"):
        result = dg.materialize(
            build_step_assets(Experiment("family", list(family.values())), prefix=prefix),
            instance=instance,
            resources=_resources(prefix),
            raise_on_error=False,
        )
    assert not result.success
    # The op writes each step's lines itself, once, from the run's events; the engine's logger
    # (the command line's console lines) writes none of them in a Dagster run.
    engine = [r.getMessage() for r in caplog.records if r.name == "marin.executor"]
    assert not [m for m in engine if re.match(r"^\S+: (running|SUCCESS in|FAILED after)\b", m)], engine
    op_lines = _log_lines(instance, result.run_id)
    assert len([line for line in op_lines if line.startswith("family/bad: FAILED after")]) == 1, op_lines
    for name in ("root", "sibling", "bad"):
        assert len([line for line in op_lines if line.startswith(f"family/{name}: started")]) == 1, op_lines
    for name in ("root", "sibling"):
        assert len([line for line in op_lines if line.startswith(f"family/{name}: done in")]) == 1, op_lines
    # The sibling (slower than the failing step, no input of it) and the root are materialized.
    assert _materialized(result) == {"family/root", "family/sibling"}
    graph = StepGraph(list(family.values()), prefix)
    status = {name: read_status(graph.resolved(step).output_path).status for name, step in family.items()}
    assert status == FAMILY_STATUS_AFTER_BAD_FAILED
    (failure,) = result.get_step_failure_events()
    first_line = failure.step_failure_data.user_failure_data.description.splitlines()[0]
    assert first_line.startswith("ValueError: planned failure of bad") and "[step family/bad," in first_line
    assert "not run (DEP_FAILED)" in failure.step_failure_data.user_failure_data.description
    lines = _log_lines(instance, result.run_id)
    assert any(line.startswith("family/child: not run, input family/bad failed") for line in lines), lines
    # Dagster records a step that did not run as not materialized, never as failed: only the
    # failing step's asset may carry a failed-to-materialize event with a compute failure.
    failed_keys = _failed_to_materialize(instance, result.run_id)
    assert "family/sibling" not in failed_keys and "family/root" not in failed_keys, failed_keys
    # Each step's states are structured events on its own asset, in order.
    states = _observed_states(instance, result.run_id)
    assert [m["marin/state"] for m in states["family/bad"]] == ["running", "failed"], states["family/bad"]
    assert states["family/bad"][1]["marin/cause"].startswith("ValueError: planned failure of bad")
    assert states["family/bad"][1]["marin/seconds"] >= 0 and states["family/bad"][1]["marin/started"]
    assert [m["marin/state"] for m in states["family/sibling"]] == ["running"]
    for name in ("child", "grandchild"):
        (observed,) = states[f"family/{name}"]
        assert (
            observed["marin/state"] == "not run" and observed["marin/cause"] == "input family/bad failed (DEP_FAILED)"
        )


def _observed_states(instance: dg.DagsterInstance, run_id: str) -> dict[str, list[dict]]:
    """The ``marin/*`` metadata of each asset observation of the run, per asset, in order."""
    out: dict[str, list[dict]] = {}
    for record in instance.get_records_for_run(run_id).records:
        event = record.event_log_entry.dagster_event
        if event is not None and event.event_type_value == "ASSET_OBSERVATION":
            observation = event.event_specific_data.asset_observation
            facts = {k: v.value for k, v in observation.metadata.items() if k.startswith("marin/")}
            out.setdefault(observation.asset_key.to_user_string(), []).append(facts)
    return out


def _failed_to_materialize(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    out = {}
    for record in instance.get_records_for_run(run_id).records:
        event = record.event_log_entry.dagster_event
        if event is not None and event.event_type_value == "ASSET_FAILED_TO_MATERIALIZE":
            data = event.event_specific_data
            out[data.asset_key.to_user_string()] = str(getattr(data, "reason", ""))
    return out


def test_a_bad_concurrency_tag_fails_the_run_saying_so(prefix, dagster_home):
    steps = independent_steps(1, 0.0, name="badtag")
    result = dg.materialize(
        build_step_assets(Experiment("badtag", steps), prefix=prefix),
        instance=dg.DagsterInstance.get(),
        resources=_resources(prefix),
        tags={MAX_CONCURRENT_TAG: "zero"},
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = result.get_step_failure_events()
    assert "run tag marin/max_concurrent must be a positive integer, got 'zero'" in (
        failure.step_failure_data.user_failure_data.description
    )
    assert read_status(StepGraph(steps, prefix).resolved(steps[0]).output_path) is None  # nothing ran


def test_progress_lines_of_concurrent_steps_carry_their_step_name(prefix, dagster_home):
    from marin_assets.execution import ExecutorStep, this_output_path, versioned
    from tests.dagster_bridge.run_steps import NapConfig, talk

    steps = [
        ExecutorStep(f"talk/s{i}", talk, NapConfig(this_output_path(), versioned(0.3), versioned(f"t{i}")))
        for i in range(3)
    ]
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        build_step_assets(Experiment("talk", steps), prefix=prefix), instance=instance, resources=_resources(prefix)
    )
    assert result.success
    lines = _log_lines(instance, result.run_id)
    for i in range(3):  # each step's progress line is among its own lines (the log filter on its name)
        assert f"talk/s{i}: train: step 1: loss 2.0 (t{i})" in lines, lines


def location_naps_job() -> dg.JobDefinition:
    """A job of the location (an experiment's) over two sleeping steps (module level: ``dg.reconstructable``)."""
    from marin_assets.definitions import build_definitions

    experiment = Experiment("inproc", independent_steps(2, 0.2, name="inproc"))
    return build_definitions([experiment]).resolve_job_def("inproc_job")


def test_a_run_of_the_location_runs_its_op_in_the_run_process(prefix, dagster_home, monkeypatch):
    # execute_job, unlike execute_in_process, runs the job with its own executor, as a run worker does.
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    instance = dg.DagsterInstance.get()
    with dg.execute_job(dg.reconstructable(location_naps_job), instance) as result:
        assert result.success
        run_id = result.run_id
    types = [r.event_log_entry.dagster_event_type for r in instance.get_records_for_run(run_id).records]
    # No step process that imports Dagster and loads the location again (the multiprocess executor's).
    assert dg.DagsterEventType.STEP_WORKER_STARTING not in types
    lines = [r.event_log_entry.message for r in instance.get_records_for_run(run_id).records]
    assert any(line.startswith(f"Executing steps in process (pid: {os.getpid()})") for line in lines), lines
    assert sum(t == dg.DagsterEventType.ASSET_MATERIALIZATION for t in types) == 2


def _say(config: dict) -> dict:
    print(f"{config['tag']} says hello")
    return {}


def test_what_a_step_prints_is_in_the_run_log_once_under_its_name(prefix, dagster_home, capfd):
    from marin_assets.execution import ExecutorStep, this_output_path, versioned

    steps = [
        ExecutorStep(f"say/s{i}", _say, {"output_path": this_output_path(), "tag": versioned(f"s{i}")})
        for i in range(2)
    ]
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        build_step_assets(Experiment("say", steps), prefix=prefix), instance=instance, resources=_resources(prefix)
    )
    assert result.success
    lines = _log_lines(instance, result.run_id)
    for i in range(2):  # each step's line, tagged with its own step, though both ran at once
        assert [line for line in lines if f"s{i} says hello" in line] == [f"say/s{i}: s{i} says hello"], lines
    assert capfd.readouterr().out.count("s0 says hello") == 1  # and printed once
