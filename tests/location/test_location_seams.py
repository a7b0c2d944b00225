"""The code location's seams with Dagster, on a real on-disk instance: the prefix comes from the
storage resource when each run starts (never when the location loads), declared automation is on
when declared (eager steps, schedules), and a fixed script leaves no error asset behind."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.definitions import (
    AUTOMATION_SENSOR,
    ERROR_CLEANUP_SENSOR,
    ERROR_PREFIX,
    build_definitions,
)
from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin_assets.execution.declarations import Experiment, StepSchedule
from marin_assets.execution.discovery import discover
from tests.execution.sample_steps import WriteConfig, write_value

SOURCE = ExecutorStep("seams/source", write_value, WriteConfig(this_output_path(), versioned(1)))
FOLLOWER = ExecutorStep("seams/follower", write_value, WriteConfig(this_output_path(), inputs=[output_path_of(SOURCE)]))


def _outputs(prefix: Path) -> dict[str, int]:
    return {p.parent.name.rsplit("-", 1)[0]: json.loads(p.read_text())["total"] for p in prefix.rglob("value.json")}


def test_each_run_writes_under_the_prefix_it_finds_when_it_starts(tmp_path, dagster_home, monkeypatch):
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "at_load"))
    defs = build_definitions([Experiment("seams", [FOLLOWER])])  # loaded once, never reloaded below
    storage = defs.resources["marin_storage"]
    assert isinstance(storage.prefix, dg.EnvVar) and storage.prefix.env_var_name == "MARIN_PREFIX"
    job = defs.resolve_implicit_global_asset_job_def()
    instance = dg.DagsterInstance.get()
    runs = []
    for prefix in (first, second):
        monkeypatch.setenv("MARIN_PREFIX", str(prefix))  # the deployment changes it between runs
        result = job.execute_in_process(instance=instance)
        assert result.success
        runs.append(result)
    # One run's config sets it for that run alone.
    config = {"resources": {"marin_storage": {"config": {"prefix": str(third)}}}}
    runs.append(job.execute_in_process(instance=instance, run_config=config))
    assert runs[-1].success
    for prefix, result in zip((first, second, third), runs, strict=True):
        assert _outputs(prefix) == {"source": 1, "follower": 1}, prefix
        uris = [
            e.event_specific_data.materialization.metadata["dagster/uri"].value
            for e in result.get_asset_materialization_events()
        ]
        assert len(uris) == 2 and all(uri.startswith(str(prefix) + "/") for uri in uris), uris
        # Each run's experiment record (what the browser reads) is under its prefix too.
        assert list((prefix / "experiments").glob("seams*.json"))
    assert not (tmp_path / "at_load").exists()


def test_without_marin_prefix_at_load_each_run_reads_it_or_uses_data(tmp_path, dagster_home, monkeypatch):
    monkeypatch.delenv("MARIN_PREFIX", raising=False)
    defs = build_definitions([Experiment("seams", [SOURCE])])
    assert defs.resources["marin_storage"].prefix is None
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "later"))
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=dg.DagsterInstance.get())
    assert result.success and _outputs(tmp_path / "later") == {"source": 1}


def test_eager_steps_get_a_running_automation_sensor(prefix, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    defs = build_definitions([Experiment("seams", [FOLLOWER], eager_steps=[FOLLOWER])])
    sensor = defs.resolve_sensor_def(AUTOMATION_SENSOR)
    assert isinstance(sensor, dg.AutomationConditionSensorDefinition)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    graph = defs.resolve_asset_graph()
    assert sensor.asset_selection.resolve(graph) == {asset_key_for("seams/follower")}
    assert graph.get(asset_key_for("seams/follower")).automation_condition is not None
    # Without eager steps there is nothing to evaluate: no sensor.
    plain = build_definitions([Experiment("seams", [FOLLOWER])])
    assert AUTOMATION_SENSOR not in {s.name for s in plain.sensors}


def test_a_schedule_says_whether_it_runs_once_loaded(prefix, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    schedules = [
        StepSchedule("seams_nightly", "0 3 * * *", [FOLLOWER]),
        StepSchedule("seams_hourly", "0 * * * *", [SOURCE], default_status="running"),
    ]
    defs = build_definitions([Experiment("seams", [FOLLOWER], schedules=schedules)])
    assert defs.resolve_schedule_def("seams_nightly").default_status == dg.DefaultScheduleStatus.STOPPED
    assert defs.resolve_schedule_def("seams_hourly").default_status == dg.DefaultScheduleStatus.RUNNING
    with pytest.raises(ValueError, match="default_status"):
        StepSchedule("bad", "0 3 * * *", [SOURCE], default_status="on")  # type: ignore[arg-type]


TEAM_SCRIPT = '''
"""A team's training script: its own schedule, declared next to its steps."""
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from marin_assets.execution.declarations import Experiment, StepSchedule
from tests.execution.sample_steps import WriteConfig, write_value

model = ExecutorStep("team/model", write_value, WriteConfig(this_output_path(), versioned(3)))
EXPERIMENT = Experiment(
    steps=[model],
    schedules=[StepSchedule("team_retrain_nightly", "0 2 * * *", [model], default_status="running")],
)
'''


def _team_project(root: Path, broken: bool, folder: str) -> Path:
    """A team's project whose ``pyproject.toml`` lists ``<folder>/*.py`` (a folder name of its own per
    test: one process imports each script module once, by name)."""
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[tool.marin]\nexperiments = ["{folder}/*.py"]\n')
    (root / folder / "team_train.py").write_text(TEAM_SCRIPT)
    script = 'raise RuntimeError("broken on purpose")\n' if broken else TEAM_SCRIPT.replace("team/model", "team/probe")
    (root / folder / "team_probe.py").write_text(script.replace("team_retrain_nightly", "team_probe_nightly"))
    return root


def test_a_team_repository_gets_the_schedules_it_declares(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    project = _team_project(tmp_path / "team", broken=False, folder="team_schedules")
    defs = build_definitions(scripts=discover(root=str(project)))
    schedule = defs.resolve_schedule_def("team_retrain_nightly")
    assert schedule.cron_schedule == "0 2 * * *" and schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    job = defs.resolve_job_def("team_retrain_nightly_job")
    assert set(job.asset_layer.selected_asset_keys) == {asset_key_for("team/model")}


def test_a_fixed_scripts_error_asset_leaves_the_catalog(tmp_path, dagster_home, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    project = _team_project(tmp_path / "team", broken=True, folder="team_errors")
    broken = build_definitions(scripts=discover(root=str(project)))
    error_key = dg.AssetKey([ERROR_PREFIX, "team_probe"])
    error = broken.resolve_asset_graph().get(error_key)
    assert "broken on purpose" in error.description and "`" not in error.description
    # Not materializable: "Materialize all" of its group records nothing on it.
    assert not error.is_executable
    assert error_key not in broken.resolve_implicit_global_asset_job_def().asset_layer.selected_asset_keys
    instance = dg.DagsterInstance.get()
    # An instance that holds records of the error asset (written by an earlier version, which
    # materialized it): the key stays in the catalog after the fix unless it is removed.
    instance.report_runless_asset_event(dg.AssetMaterialization(error_key))
    assert _tick(broken, ERROR_CLEANUP_SENSOR, instance) == "no stale error asset"
    assert instance.get_asset_keys(prefix=[ERROR_PREFIX]) == [error_key]  # still broken: kept

    _team_project(project, broken=False, folder="team_errors")  # the fix; then the location loads again
    fixed = build_definitions(scripts=discover(root=str(project)))
    assert error_key not in fixed.resolve_asset_graph().get_all_asset_keys()
    assert _tick(fixed, ERROR_CLEANUP_SENSOR, instance) == "removed experiment_errors/team_probe"
    assert instance.get_asset_keys(prefix=[ERROR_PREFIX]) == []
    assert _tick(fixed, ERROR_CLEANUP_SENSOR, instance) == "no stale error asset"


def _tick(defs: dg.Definitions, name: str, instance: dg.DagsterInstance) -> str:
    """One tick of a sensor as the daemon runs it; its skip reason."""
    sensor = defs.resolve_sensor_def(name)
    result = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert isinstance(result, dg.SkipReason), result
    return result.skip_message


def test_a_ui_materialization_that_waited_names_the_run_that_did_the_work(prefix, dagster_home, monkeypatch):
    from marin_assets.execution import StepGraph
    from marin_assets.execution.lease import lease_for_output
    from marin_assets.execution.status import STATUS_SUCCESS, write_status

    monkeypatch.setenv("MARIN_PREFIX", prefix)
    defs = build_definitions([Experiment("seams", [SOURCE])])
    output = StepGraph([SOURCE], prefix).resolved(SOURCE).output_path
    other = lease_for_output(output, 30.0, 90.0)  # another runner computes the step meanwhile
    assert other.try_acquire()

    waiting = threading.Event()

    class _Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "waiting for another runner" in record.getMessage():
                waiting.set()

    handler = _Waiting()
    engine_log = logging.getLogger("marin.executor")
    engine_log.addHandler(handler)
    level = engine_log.level
    engine_log.setLevel(logging.INFO)  # the engine's "waiting for another runner" line is INFO

    def finish_elsewhere() -> None:
        waiting.wait(timeout=120)  # the materialization found the step leased and waits for it
        write_value(WriteConfig(output, 1))
        write_status(output, STATUS_SUCCESS, run_id="other-runner-run")
        other.release()

    worker = threading.Thread(target=finish_elsewhere)
    worker.start()
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(instance=dg.DagsterInstance.get())
    worker.join()
    engine_log.removeHandler(handler)
    engine_log.setLevel(level)
    assert result.success and waiting.is_set()
    (event,) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}
    assert meta["marin/action"] == "waited" and meta["marin/computed_by_run"] == "other-runner-run", meta


DOCS = Path(__file__).resolve().parents[2] / "docs" / "dagster.md"


def _worked_example() -> str:
    """The Python block of docs/dagster.md's worked example (a team repository's automation)."""
    text = DOCS.read_text()
    block = text[text.index("<!-- worked example: team automation") :]
    code = block[block.index("```python\n") + len("```python\n") :]
    return code[: code.index("\n```")]


def test_the_documented_team_repository_gets_its_landing_sensor_schedule_and_eager_step(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    project = tmp_path / "team"
    (project / "team_doc_example").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.marin]\nexperiments = ["team_doc_example/*.py"]\n')
    (project / "team_doc_example" / "team_web.py").write_text(_worked_example())
    defs = build_definitions(scripts=discover(root=str(project)))
    graph = defs.resolve_asset_graph()
    assert not [k for k in graph.get_all_asset_keys() if k.path[0] == ERROR_PREFIX]
    sensors = {s.name: s for s in defs.sensors}
    assert "landing_sensor_team_web" in sensors  # from its own LandingDrops declaration
    assert sensors[AUTOMATION_SENSOR].asset_selection.resolve(graph) == {asset_key_for("team_web/report")}
    assert sensors[AUTOMATION_SENSOR].default_status == dg.DefaultSensorStatus.RUNNING
    schedule = defs.resolve_schedule_def("team_web_nightly")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    nightly = defs.resolve_job_def("team_web_nightly_job")
    assert set(nightly.asset_layer.selected_asset_keys) == {asset_key_for("team_web/summary")}
