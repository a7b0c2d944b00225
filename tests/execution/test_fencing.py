"""Fencing and takeover on gs://: a paused holder cannot record anything, a dead one is replaced at once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from marin_assets.execution import ExecutorOptions, StepGraph
from marin_assets.execution.fence import StepCancelled
from marin_assets.execution.lease import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S, lease_for_output
from marin_assets.execution.outcomes import ExecutorError
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_status
from marin_assets.execution.storage import read_text
from tests.execution import fencing_steps

REPO = Path(__file__).resolve().parents[2]


def _runner(which: str, prefix: str, marker_dir: Path, *args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.execution.fencing_steps", which, "--prefix", prefix, "--no_record", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "MARKER_DIR": str(marker_dir), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events(marker_dir: Path) -> list[list[str]]:
    log = marker_dir / "events.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)  # fine enough to catch a runner between two chunks it writes
    raise AssertionError(f"timed out waiting for {what}")


def test_paused_holder_is_fenced_and_records_nothing(gcs_server, gcs_prefix, tmp_path):
    markers = tmp_path / "markers"
    fast = ["--heartbeat_s", "0.5", "--stale_s", "3"]
    holder = _runner("chain", gcs_prefix, markers, *fast)
    # Freeze the holder right after it wrote a part of the second step (mid-step, between writes).
    _wait_for(lambda: ["wrote", "chain1", "1", str(holder.pid)] in _events(markers), 90, "the holder to reach chain1")
    holder.send_signal(signal.SIGSTOP)
    try:
        taker = _runner("chain", gcs_prefix, markers, *fast)
        _wait_for(lambda: ["wrote", "chain1", "1", str(taker.pid)] in _events(markers), 60, "the takeover of chain1")
    finally:
        holder.send_signal(signal.SIGCONT)  # resumes while the taker is still writing
    _, holder_err = holder.communicate(timeout=120)
    _, taker_err = taker.communicate(timeout=180)
    assert taker.returncode == 0, taker_err[-3000:]
    assert holder.returncode != 0
    assert "fence/chain1" in holder_err and "lease" in holder_err and "lost" in holder_err
    # The resumed holder wrote no part after it was frozen: its last event is the freeze point.
    holder_writes = [e for e in _events(markers) if e[0] == "wrote" and e[-1] == str(holder.pid)]
    assert holder_writes[-1][1:3] == ["chain1", "1"]

    clean_prefix = f"gs://{gcs_server.create_bucket()}/marin"
    clean = _runner("chain", clean_prefix, tmp_path / "clean-markers", PART_DELAY_S="0")
    _, clean_err = clean.communicate(timeout=180)
    assert clean.returncode == 0, clean_err[-3000:]
    steps = fencing_steps.chain()
    raced, reference = StepGraph(steps, gcs_prefix), StepGraph(steps, clean_prefix)
    differing = []
    for step in steps:
        out, ref = raced.resolved(step).output_path, reference.resolved(step).output_path
        assert read_status(out).status == "SUCCESS"
        if read_text(f"{out}/parts.txt") != read_text(f"{ref}/parts.txt"):
            differing.append(step.name)
    assert differing == []


def _trainers(marker_dir: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in marker_dir.glob("trainer-*")]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_killed_holder_is_replaced_at_once_and_leaves_no_trainer(gcs_prefix, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    holder = _runner("train", gcs_prefix, markers)  # default heartbeat/stale settings
    _wait_for(lambda: _trainers(markers), 90, "the holder's trainer to start")
    (trainer,) = _trainers(markers)
    holder.kill()  # SIGKILL: no chance to clean up
    holder.wait(timeout=30)
    _wait_for(lambda: not _alive(trainer), 5, "the orphaned trainer to die with its runner")

    steps = fencing_steps.train()
    graph = StepGraph(steps, gcs_prefix)
    out = graph.resolved(steps[0]).output_path
    assert read_status(out).status == "RUNNING"
    monkeypatch.setenv("MARKER_DIR", str(markers))
    monkeypatch.setenv("FAKE_TRAIN_S", "0.2")
    assert (ExecutorOptions().heartbeat_s, ExecutorOptions().stale_s) == (DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S)
    start = time.monotonic()
    report = StepRunner(ExecutorOptions()).run(graph)
    assert [o.action for o in report.outcomes] == ["ran"]
    took_over_after = time.monotonic() - start
    assert took_over_after < 5, f"takeover of a dead holder's lease took {took_over_after:.1f}s"
    assert read_status(out).status == "SUCCESS"
    assert [t for t in _trainers(markers) if _alive(t)] == []


def test_lost_lease_cancels_an_in_process_step_and_records_nothing(prefix):
    started, cancelled = threading.Event(), threading.Event()

    def long_step(config) -> None:
        started.set()
        try:
            while True:
                time.sleep(0.01)
        except StepCancelled:
            cancelled.set()
            raise

    steps = fencing_steps.chain(1)
    graph = StepGraph(steps, prefix)
    out = graph.resolved(steps[0]).output_path
    executor = StepRunner(ExecutorOptions(heartbeat_s=0.2, stale_s=1.0), launch=lambda node, config: long_step(config))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            executor.run(graph)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(30)
    # Another runner takes the lease over (as after a pause past stale_s).
    lease = lease_for_output(out, heartbeat_s=0.2, stale_s=1.0)
    current = lease.backend.read(lease.path)
    assert lease.backend.replace_if(lease.path, current[1], b'{"owner": "usurper"}') is not None
    thread.join(timeout=30)
    assert cancelled.is_set()
    assert isinstance(errors[0], ExecutorError)
    assert "fence/chain0" in str(errors[0]) and "lost" in str(errors[0])
    assert read_status(out).status == "RUNNING"  # neither SUCCESS nor FAILED was recorded


def test_lost_lease_kills_the_step_subprocess(prefix, tmp_path, monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("MARKER_DIR", str(markers))
    monkeypatch.setenv("FAKE_TRAIN_S", "600")
    steps = fencing_steps.train()
    graph = StepGraph(steps, prefix)
    out = graph.resolved(steps[0]).output_path
    errors: list[BaseException] = []

    def run() -> None:
        try:
            StepRunner(ExecutorOptions(heartbeat_s=0.2, stale_s=1.0)).run(graph)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    _wait_for(lambda: _trainers(markers), 60, "the trainer subprocess to start")
    (trainer,) = _trainers(markers)
    lease = lease_for_output(out, heartbeat_s=0.2, stale_s=1.0)
    current = lease.backend.read(lease.path)
    assert lease.backend.replace_if(lease.path, current[1], b'{"owner": "usurper"}') is not None
    thread.join(timeout=30)
    assert not thread.is_alive()
    _wait_for(lambda: not _alive(trainer), 5, "the trainer to be killed with the lost lease")
    assert "fence/train" in str(errors[0]) and "lost" in str(errors[0])
    assert read_status(out).status == "RUNNING"


@pytest.mark.slow
@pytest.mark.ray
def test_lost_lease_ends_a_ray_task_launched_through_an_accelerator_config(prefix, tmp_path, monkeypatch):
    import ray

    from marin_resources.ray_config import RayClusterConfig
    from marin_resources.ray_connect import ensure_ray
    from marin_resources.ray_head import stop_embedded_head

    ray.shutdown()
    temp_dir = f"/tmp/mr-fence-{os.getpid()}"
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the head's workers import the step module by name
    try:
        ensure_ray(RayClusterConfig(num_cpus=2, temp_dir=temp_dir))
        markers = tmp_path / "markers"
        steps = fencing_steps.ray_loop(str(markers))
        graph = StepGraph(steps, prefix)
        out = graph.resolved(steps[0]).output_path
        errors: list[BaseException] = []

        def run() -> None:
            try:
                StepRunner(ExecutorOptions(heartbeat_s=0.5, stale_s=3.0)).run(graph)
            except BaseException as exc:  # noqa: BLE001 - inspected below
                errors.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        ticks = markers / "ticks.log"
        _wait_for(lambda: ticks.exists() and len(ticks.read_text().splitlines()) >= 3, 180, "the Ray task to tick")
        (worker,) = {int(line.split()[1]) for line in ticks.read_text().splitlines()}
        lease = lease_for_output(out, heartbeat_s=0.5, stale_s=3.0)
        current = lease.backend.read(lease.path)
        assert lease.backend.replace_if(lease.path, current[1], b'{"owner": "usurper"}') is not None
        _wait_for(lambda: not _alive(worker), 10, "the Ray worker to end itself")
        thread.join(timeout=120)
        assert not thread.is_alive()
        count = len(ticks.read_text().splitlines())
        time.sleep(1.0)
        assert len(ticks.read_text().splitlines()) == count  # no tick after the fence (no retry ran it)
        assert "fence/ray_loop" in str(errors[0]) and "lost" in str(errors[0])
        assert read_status(out).status == "RUNNING"
    finally:
        ray.shutdown()
        stop_embedded_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
