"""A step on a Ray worker, run by the Dagster op (the UI path): its progress lines and what it prints
reach the run's event log once each, under the step's name, and its materialization -- through the
engine's stream and the driver's relay (``marin_resources.progress``, public Ray API), not by reading
Ray's forwarded stdout (``log_to_driver`` is off); the printed line is in the driver's own output
once. Without Ray, the step's thread reports to the attempt's listeners.

The driver is a separate process connected to the package's embedded head. The remote-node form
(a worker node, a driver over Ray Client) is ``tests/deploy/test_ray_links_restart.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
STEP = "checkpoints/progress_model"

DRIVER = r"""
import json, os, sys
from dataclasses import dataclass

import dagster as dg

from marin_assets.execution.declarations import Experiment
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.execution import ExecutorStep, this_output_path
from marin_resources.accelerators import CpuConfig
from marin_resources.dagster_resources import MarinStorageResource, RayResource


@dataclass(frozen=True)
class TrainConfig:
    output_path: str


def train(config):
    import json, os, sys
    from marin_assets.training import subprocess_runner

    # Levanter writes several metric records per step (loss, then throughput): one line per step.
    records = []
    for i in range(3):
        records.append({"train": {"loss": 6.0 - i}})
        records.append({"throughput": {"tokens_per_second": 100.0 * (i + 1), "mfu": 0.5}})
    code = "".join(
        "print(%r, flush=True)\n" % json.dumps({"tracker": "json_logger", "event": "log", "step": i // 2,
                                               "metrics": metrics})
        for i, metrics in enumerate(records)
    )
    os.makedirs(config.output_path, exist_ok=True)
    log = os.path.join(config.output_path, "train.log")
    print("hello from the worker", flush=True)
    proc = subprocess_runner.start([sys.executable, "-c", code], log, dict(os.environ), label="train")
    assert subprocess_runner.wait(proc, 120) == 0
    return {"pid": os.getpid()}


step = ExecutorStep(sys.argv[2], train, TrainConfig(this_output_path()), resources=CpuConfig())
prefix = sys.argv[1]
instance = dg.DagsterInstance.get()
result = dg.materialize(
    build_step_assets(Experiment("progress", [step]), prefix=prefix),
    instance=instance,
    resources={"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()},
)
messages = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None and e.user_message]
(materialization,) = result.get_asset_materialization_events()
metadata = {k: v.value for k, v in materialization.event_specific_data.materialization.metadata.items()}
print("RESULT " + json.dumps({"success": result.success, "messages": messages, "metadata": metadata,
                              "driver_pid": os.getpid()}, default=str), flush=True)
"""


@pytest.mark.timeout(240)
def test_a_ray_workers_progress_and_output_reach_the_dagster_run_once(ray_head, ray_tmpdir, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "MARIN_RAY_LOG_TO_DRIVER"}
    env.update(MARIN_RAY_TMPDIR=ray_tmpdir, PYTHONPATH=str(REPO), DAGSTER_HOME=str(tmp_path / "dagster_home"))
    os.makedirs(env["DAGSTER_HOME"], exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "prefix"), STEP],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=220,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"rc {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    result = json.loads(line[len("RESULT ") :])
    assert result["success"], proc.stderr[-5000:]
    # One progress line per training step (its two records merged), under the step's name.
    expected = [f"train: step {i}: loss {6.0 - i:g}, tokens/s {100 * (i + 1)}, MFU % 0.5" for i in range(3)]
    assert [m for m in result["messages"] if "train: step" in m] == [f"{STEP}: {x}" for x in expected]
    # The printed line: once in the run's event log, under the step's name; once in the driver's output.
    assert [m for m in result["messages"] if "hello from the worker" in m] == [f"{STEP}: hello from the worker"]
    printed = [x for x in proc.stdout.splitlines() if "hello from the worker" in x and not x.startswith("RESULT ")]
    assert printed == [f"({STEP}) hello from the worker"], proc.stdout[-3000:]
    # The materialization carries the step's last progress line, how many there were, and where it ran.
    assert result["metadata"]["marin/progress"] == expected[-1]
    assert result["metadata"]["marin/progress_lines"] == 3
    assert result["metadata"]["pid"] != result["driver_pid"]  # it ran in a Ray worker


# The modules a progress line passes through, from the subprocess's log to the Dagster run's log.
PROGRESS_PATH = (
    "marin_assets/training/subprocess_runner.py",
    "marin_resources/progress.py",
    "marin_assets/execution/ray_launch.py",
    "marin_assets/dagster_bridge/progress.py",
    "marin_resources/ray_connect.py",
)
# An import or attribute use (a logger named "ray._private.worker" is neither).
PRIVATE_RAY_USE = re.compile(
    r"(from|import) ray\._private|ray\._private\.\w+\.|ray\._raylet|ray\.dashboard\.modules|internal_kv"
    r"|\._job_config|\._init_args"
)
PRIVATE = re.compile(r"ray\._private|ray\._raylet|stdstream|log_client|_internal_kv|dagster\._")


def test_no_private_ray_or_dagster_api_on_the_progress_path_and_only_one_internals_module():
    for path in PROGRESS_PATH:
        text = (REPO / path).read_text()
        assert not PRIVATE.search(text), f"{path}: {PRIVATE.search(text).group(0)}"
    # Ray's private API is used in one module only (which says what breaks when it fails).
    users = sorted(
        str(p.relative_to(REPO))
        for root in ("marin_resources", "marin_assets")
        for p in (REPO / root).rglob("*.py")
        if PRIVATE_RAY_USE.search(p.read_text())
    )
    assert users == ["marin_resources/ray_internals.py"], users
