"""A command-line run recorded in a real on-disk Dagster instance, as it happened.

``recording_project/experiments/rec_run.py`` runs from the command line (a real ``executor_main``
in a subprocess): two drops, a training that sleeps and logs Levanter-style metric records, its
evaluation and an unrelated step. The instance then holds ONE run for the invocation, with the
steps' real seconds, the training's progress lines, every partition's materialization, the data
versions Dagster's staleness reads, and -- when a step fails -- a failed run naming it, with the
unrelated step still materialized.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.recording import UnitRecord, materialization_of, step_progress_lines
from marin_assets.execution import ExecutorStep, StepGraph, this_output_path
from marin_assets.execution.status import STATUS_SUCCESS, read_status, write_status
from tests.execution.sample_steps import WriteConfig, write_value
from tests.team_modules import team_experiments

REPO = Path(__file__).resolve().parents[2]
PROJECT = Path(__file__).resolve().parent / "recording_project"
BRIDGE = REPO / "marin_assets" / "dagster_bridge"


@pytest.fixture
def project(tmp_path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _run_script(project: Path, prefix: str, home: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "DAGSTER_HOME": home,
        "PYTHONPATH": f"{project}{os.pathsep}{REPO}",
        "MARIN_PROJECT_ROOT": str(project),
        **env,
    }
    environment.pop("MARIN_EXPERIMENTS", None)
    return subprocess.run(
        [sys.executable, "-m", "experiments.rec_run", "--prefix", prefix, *args],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _cli_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(tags={"marin/source": "executor_main"})))


def _materializations(instance: dg.DagsterInstance, name: str) -> list[dg.EventLogRecord]:
    return list(instance.fetch_materializations(asset_key_for(name), limit=100).records)


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(run_id)]


def test_a_command_line_run_is_one_dagster_run_with_real_seconds_and_progress_lines(project, prefix, tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    first = _run_script(project, prefix, home, REC_TRAIN_SLEEP_S="1.5")
    assert first.returncode == 0, first.stderr[-4000:]
    engine_run_id = json.loads(first.stdout.strip().splitlines()[-1])["run_id"]
    instance = dg.DagsterInstance.from_config(home)
    (run,) = _cli_runs(instance)
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags["marin/run_id"] == engine_run_id and run.tags["marin/script"] == "rec_run"
    assert run.job_name == "executor_main__rec_run"
    # Every unit -- both drops of the partitioned step too -- is recorded by that one run.
    drops = _materializations(instance, "rec/per_drop")
    assert sorted(r.partition_key for r in drops) == ["a", "b"] and {r.run_id for r in drops} == {run.run_id}
    (trained,) = _materializations(instance, "rec/train")
    meta = trained.asset_materialization.metadata
    assert trained.run_id == run.run_id
    assert meta["marin/seconds"].value >= 1.5  # the step's own seconds, not the recording's
    assert meta["marin/action"].value == "ran (executor_main)" and meta["marin/cached"].value is False
    assert meta["marin/reason"].value == f"computed by command-line run {engine_run_id}"
    assert meta["marin/computed_by_run"].value == engine_run_id
    # The run's Duration is the command's: it ended before the recording wrote its first event,
    # and lasted at least as long as the training.
    record = instance.get_run_record_by_id(run.run_id)
    assert record.end_time - record.start_time >= 1.5
    assert record.end_time <= min(r.timestamp for r in drops)
    # The training's progress lines (from its train.log) are the run's log lines.
    messages = _messages(instance, run.run_id)
    assert "rec/train: train: step 3: loss 2" in messages, messages
    assert any(m.startswith("rec/train: ran in ") for m in messages)
    # The materializations carry what Dagster's staleness reads: nothing shows unsynced.
    from marin_assets.definitions import build_definitions
    from marin_assets.execution.discovery import discover

    # Discovery imports the project's scripts as `experiments.<name>`: an `experiments` package another
    # test of this process imported (another project) would shadow this project's, so set it aside.
    with team_experiments(project):
        defs = build_definitions(scripts=discover())
    assert _stale(defs, instance, "rec/evaluate") == [] and _stale(defs, instance, "rec/train") == []

    # Again: everything cached, one more run, seconds 0, no progress lines.
    second = _run_script(project, prefix, home)
    assert second.returncode == 0, second.stderr[-4000:]
    runs = _cli_runs(instance)
    assert len(runs) == 2
    latest = _materializations(instance, "rec/train")[0]
    assert latest.run_id == runs[0].run_id
    assert latest.asset_materialization.metadata["marin/action"].value == "cached"
    assert latest.asset_materialization.metadata["marin/seconds"].value == 0.0
    assert not [m for m in _messages(instance, runs[0].run_id) if "step 3" in m]


def test_a_failed_command_line_run_records_what_succeeded_and_names_the_failed_step(project, prefix, tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    proc = _run_script(project, prefix, home, REC_TRAIN_FAILS="1")
    assert proc.returncode == 1, proc.stderr[-4000:]
    instance = dg.DagsterInstance.from_config(home)
    (run,) = _cli_runs(instance)
    assert run.status == dg.DagsterRunStatus.FAILURE
    # The unrelated step and the drops are materialized by the run; the training and what needs it are not.
    assert [r.run_id for r in _materializations(instance, "rec/side")] == [run.run_id]
    assert len(_materializations(instance, "rec/per_drop")) == 2
    assert _materializations(instance, "rec/train") == [] and _materializations(instance, "rec/evaluate") == []
    failures = [
        entry.dagster_event.step_failure_data.error.message
        for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    ]
    assert len(failures) == 1
    assert "rec/train: RuntimeError: planned training failure" in failures[0], failures
    assert "rec/evaluate: not run: its input rec/train failed" in failures[0]
    # Again, with --force_run_failed false: the engine's refusal is the cause named.
    again = _run_script(project, prefix, home, "--force_run_failed", "false")
    assert again.returncode == 1, again.stderr[-4000:]
    latest = _cli_runs(instance)[0]
    assert latest.run_id != run.run_id and latest.status == dg.DagsterRunStatus.FAILURE
    (failure,) = instance.all_logs(latest.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    assert "previous run FAILED" in failure.dagster_event.step_failure_data.error.message
    assert "--force_run_failed" in failure.dagster_event.step_failure_data.error.message


def test_a_waited_materialization_names_the_run_that_did_the_work(prefix):
    step = ExecutorStep("rec/waited", write_value, WriteConfig(this_output_path(), 1))
    node = StepGraph([step], prefix).resolved(step)
    write_status(node.output_path, STATUS_SUCCESS, run_id="other-runner-7")
    record = UnitRecord(node, None, asset_key_for("rec/waited"), "waited", 4.2, read_status(node.output_path))
    materialization = materialization_of(record, prefix, "this-run", {})
    meta = {k: v.value for k, v in materialization.metadata.items()}
    assert meta["marin/action"] == "waited" and meta["marin/computed_by_run"] == "other-runner-7"
    assert "other-runner-7" in meta["marin/reason"]
    assert materialization.tags["dagster/data_version"] == node.hash


def test_progress_lines_are_read_from_every_log_of_the_step_and_capped(tmp_path):
    out = tmp_path / "eval-abc"
    out.mkdir()
    record = {"tracker": "json_logger", "event": "log", "step": 0, "metrics": {"eval/loss": 1.5}}
    rows = "".join(json.dumps({**record, "step": i}) + "\n" for i in range(1000))
    (out / "levanter_eval.log").write_text(rows)
    (out / "lm_eval.log").write_text("|arc|1|acc|0.25|\nnot progress\n")
    lines = step_progress_lines(str(out), "ev")
    assert "ev: lm_eval: arc | 1 | acc | 0.25" in lines
    levanter = [line for line in lines if line.startswith("ev: levanter_eval: step")]
    assert len(levanter) == 200 and levanter[-1] == "ev: levanter_eval: step 999: eval/loss 1.5"
    assert any("200 of 1000 progress lines" in line for line in lines)
    assert step_progress_lines(str(tmp_path / "missing"), "x") == []


@pytest.mark.parametrize("module", ["recording.py", "experiment_records.py", "maintenance_jobs.py"])
def test_the_bridge_records_without_private_dagster_imports(module):
    tree = ast.parse((BRIDGE / module).read_text())
    imported = [
        name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    ]
    assert not [name for name in imported if name.startswith("dagster._")], imported


def _stale(defs: dg.Definitions, instance: dg.DagsterInstance, step_name: str) -> list[tuple[str, str]]:
    """Dagster's stale causes of an asset (what the UI's "Unsynced" shows), as (category, dependency)."""
    # Dagster has no public API for stale causes (the UI reads them through GraphQL).
    from tests.dagster_private import stale_causes

    return stale_causes(defs, instance, asset_key_for(step_name))
