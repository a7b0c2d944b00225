"""Links and logs that survive restarts, on the Ray part of ``scripts/local_deploy.sh`` (head with
dashboard on a fixed port, one worker node, token auth; started by the topology's own ``start_ray``).

A driver connected over ``ray://`` (as a Dagster run's step process is) runs a step through the
engine's path (``name_task`` + ``recording_placement`` + an accelerator's ``launch``) whose training
subprocess prints Levanter metric records. Checked:

* the Ray task is named after the step; the step's progress lines are in the Ray task's log and
  reached the driver's ``marin.progress`` logger (what the Dagster bridge writes to the run's logs)
  through the relay (public Ray API), with no worker output forwarded to the driver;
* the driver's job in the dashboard names the Dagster run it serves;
* ``marin/ray_task`` (the one link: the task page) names the job's submission id (``marin-…``),
  which the dashboard's Jobs API knows (same Ray job id), RUNNING while the driver is connected and
  SUCCEEDED after it exits;
  ``ray_run list`` leaves that driver out (``--all`` lists it);
* Ray is stopped and started again on the same dashboard port: Ray's job ids start over
  (``01000000`` again), yet the old link's id is unknown to the new cluster ("not found") -- it
  never opens the new cluster's job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from marin_resources.deploy import local, ray_nodes, services
from marin_resources.deploy.services import DeployState

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]
STEP = "checkpoints/links_model"

DRIVER = r"""
import json, logging, sys
from marin_assets.training import subprocess_runner
from marin_resources.accelerators import CpuConfig
from marin_resources.progress import PROGRESS_LOGGER, driver_relay, run_reporting
from marin_resources.ray_connect import ensure_ray
from marin_resources.ray_jobs import describe_driver, name_task, ray_links, recording_placement

records = []
handler = logging.Handler()
handler.emit = lambda record: records.append(record.getMessage())
logger = logging.getLogger(PROGRESS_LOGGER)
logger.addHandler(handler)
logger.setLevel(logging.INFO)


def train(config):
    import os, sys, tempfile
    code = "".join(
        "print(%r, flush=True)\n" % json.dumps({"tracker": "json_logger", "event": "log", "step": i,
                                               "metrics": {"train": {"loss": 6.0 - i}}})
        for i in range(3)
    )
    log = os.path.join(tempfile.mkdtemp(), "train.log")
    proc = subprocess_runner.start([sys.executable, "-c", code], log, dict(os.environ), label="train")
    assert subprocess_runner.wait(proc, 120) == 0
    return {"trained": True}


describe_driver("dagster run links-test-run (__ASSET_JOB)")
ensure_ray()
relay = driver_relay()  # as execution.ray_launch launches a step: its lines come through the relay
task = run_reporting(recording_placement(train), sys.argv[1], relay.forwarder())
result = CpuConfig().launch(name_task(task, sys.argv[1]), {})
relay.drain()
placement = result["marin/ran_on"]
links = {k: v["value"] for k, v in ray_links(placement).items()}
print("RESULT " + json.dumps({"placement": placement, "links": links, "progress": records}), flush=True)
if len(sys.argv) > 2:  # stay connected until told to go
    sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def ray_part() -> Iterator[dict[str, Any]]:
    base = tempfile.mkdtemp(prefix="mrl-", dir="/tmp")
    state_dir = os.path.join(base, "state")
    ports = {name: services.free_port() for name in (*local._PORT_NAMES, "browser", "webserver", "ray_dashboard")}
    services.read_or_create_secret(os.path.join(state_dir, "secrets", "ray_auth_token"))
    env = local.topology_env(state_dir, ports, "unused-bucket", "unused-password")
    info: dict[str, Any] = {"state_dir": state_dir, "ports": ports, "env": env}
    try:
        info["state"] = _start(info)
        yield info
    finally:
        local.down(state_dir, quiet=True)
        shutil.rmtree(base, ignore_errors=True)


def _start(info: dict[str, Any]) -> DeployState:
    state = DeployState(state_dir=info["state_dir"], ports=info["ports"])
    state.env = {k: info["env"][k] for k in local._SHELL_ENV if k in info["env"]}
    ray_nodes.start_ray(state, info["env"], os.path.join(info["state_dir"], "logs"), worker_cpus=2)
    return state


def _client_env(state: DeployState) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(state.env)
    env["PYTHONPATH"] = str(REPO)
    # No worker output is forwarded to the driver: progress lines that arrive came through the relay.
    env["MARIN_RAY_LOG_TO_DRIVER"] = "0"
    return env


def _api(state: DeployState, path: str) -> Any:
    """GET the dashboard's ``path`` with the token; None for 404."""
    token = Path(state.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    request = urllib.request.Request(
        state.env["MARIN_RAY_DASHBOARD_URL"] + path, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def _drive(state: DeployState, wait: bool = False) -> tuple[dict[str, Any], subprocess.Popen]:
    args = [sys.executable, "-c", DRIVER, STEP] + (["wait"] if wait else [])
    proc = subprocess.Popen(
        args, cwd=REPO, env=_client_env(state), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    for line in proc.stdout:
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :]), proc
    proc.wait(timeout=60)
    pytest.fail(f"the driver ended without a result (exit {proc.returncode})")


def _job_id_of(link: str) -> str:
    return link.rsplit("/#/jobs/", 1)[1].split("/")[0]


def _task_link(dashboard: str, submission: str, task: str) -> str:
    return f"{dashboard}/#/jobs/{submission}/tasks/{task}"


@pytest.mark.timeout(900)
def test_named_task_progress_lines_and_a_link_that_survives_a_restart(ray_part):
    state: DeployState = ray_part["state"]
    dashboard = state.env["MARIN_RAY_DASHBOARD_URL"]
    result, proc = _drive(state, wait=True)
    placement, links = result["placement"], result["links"]
    try:
        # Progress: from the worker node through the relay into the driver's marin.progress logger
        # (-> the Dagster run's logs), with no worker output forwarded to the driver ...
        expected = [f"train: step {i}: loss {6.0 - i:g}" for i in range(3)]
        assert [r for r in result["progress"] if r.startswith("train:")] == expected, result["progress"]
        # ... and in the Ray task's log (the worker's stdout file the task page shows).
        logs = Path(state.ray_temp_dir) / "session_latest" / "logs" / placement["ray_worker_log"]
        assert "[marin progress] train: step 2: loss 4" in logs.read_text(errors="replace")
        # The task is named after the step, not after the innermost wrapper (`fenced`, `call`).
        tasks = _api(
            state,
            f"/api/v0/tasks?detail=1&limit=1000&filter_keys=job_id&filter_predicates=%3D&filter_values={placement['ray_job_id']}",
        )
        names = {t["name"] for t in tasks["data"]["result"]["result"]}
        assert STEP in names, names
        # The link names the submission id, which the dashboard resolves to this very job.
        submission = placement["ray_job_submission_id"]
        assert submission.startswith("marin-") and _job_id_of(links["marin/ray_task"]) == submission
        assert links == {"marin/ray_task": _task_link(dashboard, submission, placement["ray_task_id"])}
        job = _api(state, f"/api/jobs/{submission}")
        assert job["submission_id"] == submission and job["job_id"] == placement["ray_job_id"], job
        assert job["status"] == "RUNNING"
        # The job list names the Dagster run (describe_driver), not the process's command line.
        assert job["entrypoint"] == "dagster run links-test-run (__ASSET_JOB)", job
        # ray_run list: the driver is no Jobs API submission; --all shows it.
        listed = subprocess.run(
            [sys.executable, "-m", "marin_assets.run.ray_run", "list"],
            cwd=REPO,
            env=_client_env(state),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0 and submission not in listed.stdout and "not shown" in listed.stdout
        every = subprocess.run(
            [sys.executable, "-m", "marin_assets.run.ray_run", "list", "--all"],
            cwd=REPO,
            env=_client_env(state),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert submission in every.stdout, every.stdout
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=120)
    deadline = time.monotonic() + 60
    while _api(state, f"/api/jobs/{submission}")["status"] != "SUCCEEDED":
        assert time.monotonic() < deadline, _api(state, f"/api/jobs/{submission}")
        time.sleep(1)

    # Restart Ray on the same ports: Ray's job ids start over, the old link's id is gone.
    local.down(state.state_dir, quiet=True)
    state = ray_part["state"] = _start(ray_part)
    assert state.env["MARIN_RAY_DASHBOARD_URL"] == dashboard
    again, proc = _drive(state)
    proc.wait(timeout=120)
    new_submission = again["placement"]["ray_job_submission_id"]
    assert new_submission.startswith("marin-") and new_submission != submission
    assert _api(state, f"/api/jobs/{submission}") is None  # "not found", never the new job
    # Ray's numbering started over: a link by the old Ray job id would now name another job.
    reused = _api(state, f"/api/jobs/{placement['ray_job_id']}")
    assert reused is None or reused.get("submission_id") != submission
