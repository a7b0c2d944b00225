"""``dagster dev`` stopped with SIGINT leaves no process behind (issue 36: it "left code-server processes").

Each test starts a real ``dagster dev`` on ``tests/ui/exit_location.py`` (two Ray-task steps), in its own
session, and stops it as a user does:

* ``kill -INT <dagster dev>`` after a run that used Ray is over: the webserver, the daemon, the code
  server (``dagster code-server start``) and its ``dagster api grpc`` child, and the run's worker all exit;
* Ctrl-C (SIGINT to the whole foreground process group) while a Ray step is running: the run is
  interrupted, its Ray task is cancelled, and every process of the session exits.

What may stay is the machine's embedded Ray head (``docs/resources.md``: it outlives the process that
started it, by design); the module stops it at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from marin_resources import ray_head
from tests.conftest import launch_assets
from tests.ui.conftest import (
    LOCATION,
    REPO_ROOT,
    DagsterDev,
    _reset_signals,
    _stop_process_group,
    _wait_until_loaded,
    free_port,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

EXIT_WAIT_S = 60.0  # dagster dev's own shutdown takes ~2 s; its children drain a little longer


@pytest.fixture(scope="module")
def ray_temp_dir() -> Iterator[str]:
    """One embedded Ray head for the module (short path: Ray's socket paths stay under 107 bytes)."""
    temp_dir = f"/tmp/mrx-{os.getpid()}"
    yield temp_dir
    ray_head.stop_embedded_head(temp_dir)
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def dev(tmp_path: Path, ray_temp_dir: str) -> Iterator[DagsterDev]:
    """A ``dagster dev`` of its own session (pid = session id) on ``exit_location.py``."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(
        f"load_from:\n  - python_file:\n      relative_path: {Path(__file__).with_name('exit_location.py')}\n"
        f"      location_name: {LOCATION}\n      working_directory: {REPO_ROOT}\n"
    )
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "MARIN_PREFIX": str(prefix),
        "MARIN_RAY_TMPDIR": ray_temp_dir,
        "MARIN_TEST_BEAT_DIR": str(tmp_path / "beat"),
        "PYTHONUNBUFFERED": "1",
    }
    port = free_port()
    log_path = tmp_path / "dagster_dev.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_reset_signals,
        )
    server = DagsterDev(
        url=f"http://127.0.0.1:{port}", dagster_home=home, prefix=prefix, env=env, log_path=log_path, process=process
    )
    try:
        _wait_until_loaded(server)
        yield server
    finally:
        if process.poll() is None:
            _stop_process_group(process)
        _kill_session(process.pid, ray_temp_dir)  # whatever a failed test left: never leak into the next


def _session(sid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def _left(sid: int, ray_temp_dir: str) -> list[psutil.Process]:
    """Processes of the ``dagster dev`` session other than the embedded Ray head's (by design detached)."""
    address = ray_head._head_address(os.path.abspath(ray_temp_dir))
    head = {proc.pid for proc in ray_head._head_processes(os.path.abspath(ray_temp_dir), address)}
    return [proc for proc in _session(sid) if proc.pid not in head]


def _describe(procs: list[psutil.Process]) -> str:
    lines = []
    for proc in procs:
        try:
            lines.append(f"{proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            continue
    return "\n".join(lines)


def _wait_until_none_left(server: DagsterDev, ray_temp_dir: str) -> None:
    sid = server.process.pid
    server.process.wait(timeout=EXIT_WAIT_S)
    deadline = time.monotonic() + EXIT_WAIT_S
    while left := _left(sid, ray_temp_dir):
        if time.monotonic() > deadline:
            pytest.fail(
                f"{EXIT_WAIT_S:.0f} s after dagster dev exited, these processes of it still run:\n"
                f"{_describe(left)}\n--- dagster dev log ---\n{server.log_tail()}"
            )
        time.sleep(0.5)


def _kill_session(sid: int, ray_temp_dir: str) -> None:
    for proc in _left(sid, ray_temp_dir):
        try:
            proc.kill()
        except psutil.Error:
            continue


def _wait_for_beat(server: DagsterDev, run_id: str, name: str) -> int:
    pid_file = Path(server.env["MARIN_TEST_BEAT_DIR"]) / name / "pid"
    deadline = time.monotonic() + 180
    while not pid_file.exists():
        assert time.monotonic() < deadline, f"the Ray task of exit/{name} never started\n{server.log_tail()}"
        assert server.run(run_id)["status"] not in ("FAILURE", "CANCELED"), server.log_tail()
        time.sleep(0.5)
    return int(pid_file.read_text())


def test_sigint_to_dagster_dev_after_a_ray_run_leaves_no_process(dev: DagsterDev, ray_temp_dir: str):
    run_id = launch_assets(dev, [["exit", "quick"]])
    assert dev.wait_for_run(run_id, timeout=240)["status"] == "SUCCESS", dev.log_tail()
    assert _left(dev.process.pid, ray_temp_dir), "dagster dev has no process before it is stopped?"
    os.kill(dev.process.pid, signal.SIGINT)  # `kill -INT <pid>`: the dagster dev process alone
    _wait_until_none_left(dev, ray_temp_dir)


def test_ctrl_c_during_a_ray_step_cancels_it_and_leaves_no_process(dev: DagsterDev, ray_temp_dir: str):
    run_id = launch_assets(dev, [["exit", "long"]])
    task_pid = _wait_for_beat(dev, run_id, "long")
    assert psutil.pid_exists(task_pid)
    os.killpg(dev.process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
    _wait_until_none_left(dev, ray_temp_dir)
    deadline = time.monotonic() + EXIT_WAIT_S
    while psutil.pid_exists(task_pid) and psutil.Process(task_pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"the step's Ray task (pid {task_pid}) still runs after Ctrl-C"
        time.sleep(0.5)
