"""A dead raylet or dashboard agent of the embedded head is noticed and the head replaced for the next
run, with a message that says so -- not a minute-long wait for a raylet ending in ``Failed to connect
to Ray cluster`` (only the GCS port used to be probed).

Each run is its own driver process, as command-line runs are; the head is this test's own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from marin_resources.ray_head import _head_processes, _program, missing_daemons, stop_embedded_head

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]

RUN = r"""
import logging, sys
from dataclasses import dataclass
logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
from marin_assets.execution import ExecutorStep, run_steps, this_output_path
from marin_assets.execution.status import read_metadata
from marin_resources.accelerators import CpuConfig


@dataclass(frozen=True)
class Probe:
    output_path: str
    run: str


def where(config):
    import os
    return {"pid": os.getpid()}


step = ExecutorStep("heal/probe", where, Probe(this_output_path(), sys.argv[2]), resources=CpuConfig())
report = run_steps([step], sys.argv[1])
print("RAN", report.outcomes[0].action, read_metadata(report.outcomes[0].output_path)["marin/ran_on"]["ray_node_id"])
"""


def _run(prefix: Path, label: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN, str(prefix), label],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _kill(temp_dir: str, program: str) -> int:
    target = next(p for p in _head_processes(temp_dir, None) if _program(p).endswith(program))
    os.kill(target.pid, signal.SIGKILL)
    return target.pid


@pytest.mark.timeout(900)
def test_a_killed_raylet_or_agent_is_noticed_and_the_next_run_succeeds(tmp_path):
    temp_dir = tempfile.mkdtemp(prefix="mrh-", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(MARIN_RAY_TMPDIR=temp_dir, PYTHONPATH=str(REPO), MARIN_RAY_LOG_TO_DRIVER="0")
    try:
        first = _run(tmp_path / "p1", "first", env)
        assert first.returncode == 0 and "RAN ran" in first.stdout, first.stderr[-4000:]
        assert missing_daemons(temp_dir) == []
        node = first.stdout.split()[-1]

        _kill(temp_dir, "/raylet")
        second = _run(tmp_path / "p2", "second", env)
        assert second.returncode == 0 and "RAN ran" in second.stdout, second.stderr[-4000:]
        assert "lost its raylet" in second.stderr and "starting a new head" in second.stderr, second.stderr[-3000:]
        assert "Failed to connect" not in second.stderr
        assert second.stdout.split()[-1] != node  # a new head (node) ran it

        _kill(temp_dir, "ray::DashboardAgent")
        third = _run(tmp_path / "p3", "third", env)
        assert third.returncode == 0 and "RAN ran" in third.stdout, third.stderr[-4000:]
        assert "dashboard agent" in third.stderr and "starting a new head" in third.stderr, third.stderr[-3000:]
    finally:
        stop_embedded_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
