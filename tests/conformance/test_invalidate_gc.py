"""``invalidate`` and ``gc`` from the command line on outputs of real runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conformance.marin_import import REPO, run_marin_script, summary


def cli(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"marin_assets.execution.{module}", *args],
        cwd=str(REPO),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_invalidate_marks_the_step_and_its_descendants_without_deleting_data(prefix):
    assert run_marin_script("hello_world", prefix).returncode == 0
    numbers = Path(prefix, "hello_world/data-bd4f05/numbers.json")
    before = numbers.read_text()
    dry = cli("invalidate", "hello_world/data", "--prefix", prefix)
    assert dry.returncode == 0, dry.stderr
    assert "hello_world/stats-8118f4" in dry.stdout and "nothing changed" in dry.stdout
    assert Path(prefix, "hello_world/data-bd4f05/.executor_status").exists()
    applied = cli("invalidate", "hello_world/data", "--prefix", prefix, "--yes")
    assert applied.returncode == 0, applied.stderr
    assert "marked 2" in applied.stdout
    assert numbers.read_text() == before  # data kept
    marker = json.loads(Path(prefix, "hello_world/stats-8118f4/.executor_invalidated").read_text())
    assert json.loads(marker["previous_status"])["status"] == "SUCCESS"
    rerun = summary(run_marin_script("hello_world", prefix))
    assert (rerun["ran"], rerun["cached"]) == (2, 0)
    assert summary(run_marin_script("hello_world", prefix))["cached"] == 2
    unknown = cli("invalidate", "no/such/step", "--prefix", prefix)
    assert unknown.returncode == 2 and "no recorded step matches" in unknown.stderr


def dagster_only_output(prefix: str) -> str:
    """Where the code location's hello-world numbers step writes under ``prefix``."""
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments import hello_world

    return StepGraph(hello_world.STEPS, prefix).resolved(hello_world.STEPS[0]).output_path


def test_gc_lists_then_deletes_only_unreferenced_outputs(prefix):
    assert run_marin_script("hello_world", prefix).returncode == 0
    stale = Path(prefix, "hello_world/data-000000")
    stale.mkdir(parents=True)
    (stale / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))
    (stale / "numbers.json").write_text("[1]")
    dagster_only = Path(dagster_only_output(prefix))  # materialized from Dagster: no experiment record
    dagster_only.mkdir(parents=True)
    (dagster_only / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))
    listed = cli("gc", "--prefix", prefix)
    assert listed.returncode == 0, listed.stderr
    assert str(stale) in listed.stdout and "nothing deleted" in listed.stdout
    assert str(dagster_only) in listed.stdout
    assert "data-bd4f05" not in listed.stdout
    assert stale.exists()
    deleted = cli("gc", "--prefix", prefix, "--yes", "--keep", "marin_assets.experiments.hello_world:STEPS")
    assert "deleted 1" in deleted.stdout
    assert not stale.exists() and dagster_only.exists()
    assert Path(prefix, "hello_world/data-bd4f05/numbers.json").exists()
    assert summary(run_marin_script("hello_world", prefix))["cached"] == 2


def test_invalidate_finds_steps_materialized_from_dagster_through_steps(prefix):
    numbers = Path(dagster_only_output(prefix))  # no experiment record
    numbers.mkdir(parents=True)
    (numbers / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))
    unknown = cli("invalidate", "hello_world/numbers", "--prefix", prefix)
    assert unknown.returncode == 2 and "no recorded step matches" in unknown.stderr
    steps = "marin_assets.experiments.hello_world:STEPS"
    applied = cli("invalidate", "hello_world/numbers", "--prefix", prefix, "--steps", steps, "--yes")
    assert applied.returncode == 0, applied.stderr
    assert not (numbers / ".executor_status").exists() and (numbers / ".executor_invalidated").exists()


def test_gc_asks_and_an_answer_on_stdin_confirms(prefix):
    stale = Path(prefix, "old/data-000000")
    stale.mkdir(parents=True)
    (stale / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))

    def answered(answer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "marin_assets.execution.gc", "--prefix", prefix],
            cwd=str(REPO),
            capture_output=True,
            text=True,
            input=answer,
            timeout=120,
        )

    declined = answered("n\n")
    assert "Delete them?" in declined.stdout and "nothing deleted" in declined.stdout and stale.exists()
    confirmed = answered("y\n")
    assert "deleted 1" in confirmed.stdout and not stale.exists(), confirmed.stdout + confirmed.stderr


def test_gc_and_invalidate_refuse_a_store_without_conditional_writes_in_one_line():
    for args in (("gc", "--prefix", "s3://bucket/marin"), ("invalidate", "a/b", "--prefix", "s3://bucket/marin")):
        proc = cli(*args)
        assert proc.returncode == 2 and "conditional writes" in proc.stderr and "Traceback" not in proc.stderr
