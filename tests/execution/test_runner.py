"""The runner: skip, fail, force, DEP_FAILED, kills, races, stale leases, dry run, run_only."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from marin_assets.execution import (
    ExecutorError,
    ExecutorOptions,
    ExecutorStep,
    StepGraph,
    output_path_of,
    this_output_path,
    versioned,
)
from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.lease import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S, StepLease
from marin_assets.execution.outcomes import StepFailedError
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_status, write_status
from tests.execution.sample_steps import WriteConfig, diamond, write_value
from tests.manual_clock import ManualClock

REPO = Path(__file__).resolve().parents[2]


def calls(counter_dir: Path) -> Counter:
    log = counter_dir / "calls.log"
    if not log.exists():
        return Counter()
    return Counter(line.split()[0].rsplit("-", 1)[0] for line in log.read_text().splitlines())


def run(steps, prefix, **options) -> object:
    return StepRunner(ExecutorOptions(**options)).run(StepGraph(steps, prefix))


def test_runs_in_dependency_order_then_skips_everything_on_rerun(prefix, tmp_path):
    counter = tmp_path / "counter"
    steps = diamond(counter_dir=str(counter))
    report = run(steps, prefix)
    assert len(report.by_action("ran")) == 4
    graph = StepGraph(steps, prefix)
    d = graph.resolved(steps[0])
    assert json.loads(Path(d.output_path, "value.json").read_text())["total"] == 1000 + (10 + 1) + (100 + 1)
    again = run(diamond(counter_dir=str(counter)), prefix)
    assert len(again.by_action("cached")) == 4 and not again.by_action("ran")
    assert calls(counter) == Counter({"a": 1, "b": 1, "c": 1, "d": 1})


def test_changed_version_runs_only_the_changed_step_and_its_dependents(prefix, tmp_path):
    counter = tmp_path / "counter"
    run(diamond(counter_dir=str(counter)), prefix)
    report = run(diamond(counter_dir=str(counter), value=2), prefix)
    assert sorted(o.name for o in report.by_action("ran")) == ["test/a", "test/b", "test/c", "test/d"]
    # A change that leaves a's version alone re-uses a.
    a = ExecutorStep("test/a", write_value, WriteConfig(this_output_path(), versioned(2), counter_dir=str(counter)))
    e = ExecutorStep(
        "test/e",
        write_value,
        WriteConfig(this_output_path(), versioned(5), counter_dir=str(counter), inputs=[output_path_of(a)]),
    )
    report = run([e], prefix)
    assert [o.name for o in report.by_action("ran")] == ["test/e"]


def test_failed_step_marks_dependents_dep_failed_and_lists_failures(prefix, tmp_path):
    a = ExecutorStep("f/a", write_value, WriteConfig(this_output_path(), versioned(1), fail=True))
    b = ExecutorStep("f/b", write_value, WriteConfig(this_output_path(), versioned(2), inputs=[output_path_of(a)]))
    ok = ExecutorStep("f/ok", write_value, WriteConfig(this_output_path(), versioned(3)))
    with pytest.raises(ExecutorError) as info:
        run([b, ok], prefix)
    assert [name for name, _, _ in info.value.failed] == ["f/a"]
    assert "planned failure" in str(info.value)
    graph = StepGraph([b, ok], prefix)
    assert read_status(graph.resolved(a).output_path).status == "FAILED"
    assert "planned failure" in read_status(graph.resolved(a).output_path).error
    assert read_status(graph.resolved(b).output_path).status == "DEP_FAILED"
    assert read_status(graph.resolved(ok).output_path).status == "SUCCESS"
    assert not Path(graph.resolved(b).output_path, "value.json").exists()


def test_failed_step_raises_until_forced(prefix):
    bad = ExecutorStep("g/a", write_value, WriteConfig(this_output_path(), versioned(1), fail=True))
    with pytest.raises(ExecutorError):
        run([bad], prefix)
    # Same version, now fixed (fail is not versioned): without force, a clear error.
    fixed = ExecutorStep("g/a", write_value, WriteConfig(this_output_path(), versioned(1), fail=False))
    with pytest.raises(ExecutorError, match="force_run_failed"):
        run([fixed], prefix)
    report = run([fixed], prefix, force_run_failed=True)
    assert [o.action for o in report.outcomes] == ["ran"]
    assert read_status(StepGraph([fixed], prefix).resolved(fixed).output_path).status == "SUCCESS"


def test_run_only_runs_matching_steps_and_their_dependencies(prefix, tmp_path, caplog):
    counter = tmp_path / "counter"
    steps = diamond(counter_dir=str(counter))
    report = StepRunner().run(StepGraph(steps, prefix), run_only=["test/b$"])
    assert sorted(o.name for o in report.outcomes) == ["test/a", "test/b"]
    assert calls(counter) == Counter({"a": 1, "b": 1})
    # Marin warns about a regex that matches nothing and runs nothing for it.
    with caplog.at_level(logging.WARNING, logger="marin.executor"):
        report = StepRunner().run(StepGraph(steps, prefix), run_only=["nothing-like-this"])
    assert report.outcomes == []
    assert "did not match any step" in caplog.text


def test_dry_run_explains_skip_run_and_the_version_diff(prefix):
    run(diamond(), prefix)
    planned = plan(StepGraph(diamond(value=7), prefix))
    by_name = {p.name: p for p in planned}
    assert all(p.action == "run" for p in planned)
    # The root cause comes first; a dependent names it and the dependency it came through.
    assert by_name["test/a"].reason.startswith("config.value: 1 -> 7")
    assert by_name["test/a"].changes == ["config.value: 1 -> 7"]
    assert by_name["test/b"].changes == ["test/a config.value: 1 -> 7 (via dependency test/a)"]
    text = format_plan(planned)
    assert "dry run: 0 skip, 4 run" in text
    again = plan(StepGraph(diamond(), prefix))
    assert {p.action for p in again} == {"skip"}
    fresh = plan(StepGraph([ExecutorStep("new/x", write_value, WriteConfig(this_output_path()))], prefix))
    assert fresh[0].reason.startswith("new")


def _python(*args: str, env: dict | None = None, **kwargs) -> subprocess.Popen:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "MARIN_RUN_OBSERVERS": "", **(env or {})}
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=REPO,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def test_executor_main_cli_dry_run_and_experiment_record(prefix):
    proc = _python("-m", "tests.execution.sample_steps", "diamond", "--prefix", prefix)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["ran"] == 4
    record = json.loads(Path(summary["experiment_record"]).read_text())
    assert record["prefix"] == prefix and len(record["steps"]) == 4 and record["user"]
    assert Path(summary["experiment_record"]).parent == Path(prefix, "experiments")
    proc = _python("-m", "tests.execution.sample_steps", "diamond", "--prefix", prefix, "--dry_run")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "dry run: 4 skip, 0 run" in out, out


def _slow_runner(prefix: str, **env: str) -> subprocess.Popen:
    """executor_main on the slow-writing step, with short leases (0.5 s beat, 2 s stale)."""
    return _python(
        "-m",
        "tests.execution.sample_steps",
        "slow",
        "--prefix",
        prefix,
        "--heartbeat_s",
        "0.5",
        "--stale_s",
        "2",
        env=env,
    )


def test_sigkill_mid_write_never_leaves_success_and_rerun_completes(prefix, tmp_path):
    markers = tmp_path / "markers"
    proc = _slow_runner(prefix, MARKER_DIR=str(markers), CHUNKS="40")
    deadline = time.time() + 60
    while time.time() < deadline and not any(markers.glob("started-*")):
        time.sleep(0.1)
    time.sleep(1.0)  # mid-write: some parts exist, the manifest does not
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    (out_dir,) = Path(prefix, "test").glob("slow-*")
    # Everything the killed attempt wrote is in its staging folder; nothing reached the output.
    assert list(out_dir.glob("part-*.txt")) == []
    parts_before = len(list(out_dir.parent.glob(f".marin_attempts/{out_dir.name}/*/*/part-*.txt")))
    assert 0 < parts_before < 40
    assert read_status(str(out_dir)).status == "RUNNING"
    assert not (out_dir / "manifest.json").exists()
    # A new runner sees RUNNING under a lease nobody refreshes, waits for it to go stale, takes over.
    proc = _slow_runner(prefix, CHUNKS="40")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert read_status(str(out_dir)).status == "SUCCESS"
    assert json.loads((out_dir / "manifest.json").read_text()) == {"parts": 40}
    assert len(list(out_dir.glob("part-*.txt"))) == 40
    assert not (out_dir.parent / ".marin_attempts").exists()  # published and cleaned up


def test_four_processes_racing_compute_each_step_exactly_once(prefix, tmp_path):
    counter = tmp_path / "counter"
    procs = [
        _python(
            "-m",
            "tests.execution.sample_steps",
            "diamond",
            "--prefix",
            prefix,
            "--heartbeat_s",
            "0.5",
            "--stale_s",
            "5",
            env={"COUNTER_DIR": str(counter), "SLEEP_S": "0.5"},
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=180)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert calls(counter) == Counter({"a": 1, "b": 1, "c": 1, "d": 1})
    summaries = [json.loads(o.strip().splitlines()[-1]) for o in outputs]
    assert sum(s["ran"] for s in summaries) == 4
    assert sum(s["ran"] + s["cached"] + s["waited"] for s in summaries) == 16


def test_stale_lease_is_taken_over_and_a_live_one_is_not(tmp_path):
    # The default 30 s / 90 s timing, on a clock the test moves: no sleeping.
    clock = ManualClock()
    path = str(tmp_path / ".executor_lease")
    first = StepLease(path, clock=clock)
    assert first.try_acquire()
    second = StepLease(path, clock=clock)
    assert not second.try_acquire()  # live: the heartbeat keeps it fresh
    clock.advance(DEFAULT_STALE_S + 60)  # several heartbeats fall due and renew the lease
    assert first.holder().seq > 1 and not first.lost.is_set()
    assert not second.try_acquire()
    # The holder freezes: its heartbeat stops, the lease goes stale.
    first._stop.set()
    first._thread.join()
    clock.advance(DEFAULT_STALE_S - 1)
    assert not second.try_acquire()  # not yet: still within stale_s of its last renewal
    clock.advance(2)
    assert second.try_acquire()
    assert second.holder().owner == second.owner and second.took_over_live_holder
    # The old holder finds out at its next heartbeat instead of overwriting the new one.
    first._start_heartbeat()
    clock.advance(DEFAULT_HEARTBEAT_S)
    assert first.lost.is_set()
    assert second.holder().owner == second.owner
    second.release()
    assert second.holder() is None


def test_a_runner_waits_for_a_live_lease_then_reuses_the_result(prefix, tmp_path):
    counter = tmp_path / "counter"
    step = ExecutorStep("w/a", write_value, WriteConfig(this_output_path(), versioned(1), counter_dir=str(counter)))
    graph = StepGraph([step], prefix)
    out = graph.resolved(step).output_path
    other = StepLease(os.path.join(out, ".executor_lease"), heartbeat_s=0.2, stale_s=5)
    assert other.try_acquire()
    write_status(out, "RUNNING")

    import threading

    def finish() -> None:
        time.sleep(1.0)
        Path(out, "value.json").write_text(json.dumps({"total": 1}))
        write_status(out, "SUCCESS")
        other.release()

    threading.Thread(target=finish).start()
    report = StepRunner(ExecutorOptions(poll_s=0.1, heartbeat_s=0.2, stale_s=5)).run(graph)
    assert [o.action for o in report.outcomes] == ["waited"]
    assert calls(counter) == Counter()


def test_sequential_partitions_run_in_key_order(prefix, tmp_path):
    counter = tmp_path / "counter"
    step = ExecutorStep(
        "seq/s",
        write_value,
        WriteConfig(this_output_path(), versioned(1), counter_dir=str(counter), sleep_s=0.3),
        partitioned_by="drops",
        sequential_partitions=True,
    )
    graph = StepGraph([step], prefix, {"drops": ["d3", "d1", "d2"]})
    report = StepRunner(ExecutorOptions(max_concurrent=4)).run(graph)
    assert [o.partition for o in report.outcomes] == ["d1", "d2", "d3"]
    # A partition whose predecessor was never computed fails clearly instead of running.
    later = StepGraph([step], prefix, {"drops": ["d1", "d2", "d3", "d35", "d4"]})
    with pytest.raises(StepFailedError, match=r"dependency seq/s\[d35\] .* not started, not SUCCESS"):
        StepRunner().execute_unit((later.resolved(step), "d4"), later)
    assert read_status(later.resolved(step).partition_output_path("d4")) is None
