"""Progress lines of a step on a Ray worker reach a real Dagster run's logs and its materialization
through the public channel (``marin_resources.progress``: the driver's relay actor), not by reading
Ray's forwarded stdout.

The driver is a separate process connected to the package's embedded head with
``MARIN_RAY_LOG_TO_DRIVER=0`` -- Ray then forwards none of its workers' output to it, so a line that
arrives came through the relay. The remote-node form (a worker node, a driver over Ray Client) is
``tests/deploy/test_ray_links_restart.py``.
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

DRIVER = r"""
import json, os, sys
from dataclasses import dataclass

import dagster as dg

from marin_assets.dagster_bridge.progress import with_progress_logs
from marin_assets.execution import ExecutorStep, run_steps, this_output_path
from marin_assets.execution.status import read_metadata
from marin_resources.accelerators import CpuConfig


@dataclass(frozen=True)
class TrainConfig:
    output_path: str


def train(config):
    import json, os, sys
    from marin_assets.training import subprocess_runner

    code = "".join(
        "print(%r, flush=True)\n" % json.dumps({"tracker": "json_logger", "event": "log", "step": i,
                                               "metrics": {"train": {"loss": 6.0 - i}}})
        for i in range(3)
    )
    os.makedirs(config.output_path, exist_ok=True)
    log = os.path.join(config.output_path, "train.log")
    proc = subprocess_runner.start([sys.executable, "-c", code], log, dict(os.environ), label="train")
    assert subprocess_runner.wait(proc, 120) == 0
    return {"pid": os.getpid()}


step = ExecutorStep("checkpoints/progress_model", train, TrainConfig(this_output_path()), resources=CpuConfig())


def compute(context):
    report = run_steps([step], sys.argv[1])
    return dg.MaterializeResult(metadata={"outcome": read_metadata(report.outcomes[0].output_path)})


@dg.asset(name="progress_model")
def progress_model(context):
    return with_progress_logs(compute)(context)


instance = dg.DagsterInstance.ephemeral()
result = dg.materialize([progress_model], instance=instance)
messages = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None and e.user_message]
metadata = result.asset_materializations_for_node("progress_model")[0].metadata["outcome"].value
print("RESULT " + json.dumps({"success": result.success, "messages": messages, "metadata": metadata,
                              "driver_pid": os.getpid()}), flush=True)
"""


@pytest.mark.timeout(240)
def test_a_ray_workers_progress_reaches_the_dagster_run_without_its_stdout(ray_head, ray_tmpdir, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        MARIN_RAY_TMPDIR=ray_tmpdir,
        MARIN_RAY_LOG_TO_DRIVER="0",  # Ray forwards no worker output to this driver
        PYTHONPATH=str(REPO),
        DAGSTER_HOME=str(tmp_path / "dagster_home"),
    )
    os.makedirs(env["DAGSTER_HOME"], exist_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path / "prefix")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=220,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"rc {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    result = json.loads(line[len("RESULT ") :])
    assert result["success"]
    # The step ran in a Ray worker, not in the driver.
    assert result["metadata"]["pid"] != result["driver_pid"]
    expected = [f"checkpoints/progress_model: train: step {i}: loss {6.0 - i:g}" for i in range(3)]
    assert [m for m in result["messages"] if "train: step" in m] == expected, result["messages"]
    # The materialization carries the step's last line and how many there were.
    assert result["metadata"]["marin/progress"] == "train: step 2: loss 4"
    assert result["metadata"]["marin/progress_lines"] == 3


def test_an_in_process_steps_progress_is_tagged_and_summarised(tmp_path):
    """Without Ray: the step's thread tags its lines, a listener gets them, its metadata sums them up."""
    from marin_assets.execution import ExecutorStep, run_steps, this_output_path
    from marin_assets.execution.status import read_metadata
    from marin_resources.progress import ProgressEvent, progress_sink, report_progress

    def step_fn(config: dict) -> dict:
        for i in range(2):
            report_progress(f"eval: step {i}")
        return {"done": True}

    seen: list[ProgressEvent] = []
    step = ExecutorStep("evaluation/inproc", step_fn, {"output_path": this_output_path()})
    with progress_sink(seen.append):
        report = run_steps([step], str(tmp_path))
    assert seen == [ProgressEvent("evaluation/inproc", f"eval: step {i}") for i in range(2)]
    metadata = read_metadata(report.outcomes[0].output_path)
    assert metadata["marin/progress"] == "eval: step 1" and metadata["marin/progress_lines"] == 2
    report_progress("after the block")  # no listener left: nothing more arrives
    assert len(seen) == 2


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
