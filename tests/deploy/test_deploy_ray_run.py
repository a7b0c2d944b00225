"""``ray_run`` against the Ray part of ``scripts/local_deploy.sh`` (head + worker node, dashboard with
token auth), started by the topology's own ``start_ray`` -- without Postgres and Dagster, which
``ray_run`` does not use.

The Ray nodes get the caller's ``PATH`` without the project's venv (where ``python`` is some other
interpreter): the jobs must still run the project's Python.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from marin_resources.deploy import local, ray_nodes, services
from marin_resources.deploy.services import DeployState

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = str(Path(sys.executable).parent)
PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
    "-----END PRIVATE KEY-----\n"
)
PEM_PARTS = ("MIIEvQIBADAN", "MzEfYyjiWA4R4", "BEGIN PRIVATE KEY")


def _path_without_venv() -> str:
    return ":".join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":") if p and p != VENV_BIN)


@pytest.fixture(scope="module")
def deployed_ray() -> Iterator[DeployState]:
    base = tempfile.mkdtemp(prefix="mdr-", dir="/tmp")
    state_dir = os.path.join(base, "state")
    ports = {name: services.free_port() for name in (*local._PORT_NAMES, "browser", "webserver", "ray_dashboard")}
    services.read_or_create_secret(os.path.join(state_dir, "secrets", "ray_auth_token"))
    env = local.topology_env(state_dir, ports, "unused-bucket", "unused-password")
    env["PATH"] = _path_without_venv()
    state = DeployState(state_dir=state_dir, ports=ports)
    state.env = {k: env[k] for k in local._SHELL_ENV}
    try:
        ray_nodes.start_ray(state, env, os.path.join(state_dir, "logs"), worker_cpus=2, worker_object_store_mb=256)
        yield state
    finally:
        local.down(state_dir, quiet=True)
        shutil.rmtree(base, ignore_errors=True)


def _shell_env(state: DeployState, **overrides: str) -> dict[str, str]:
    """What `eval "$(scripts/local_deploy.sh env)"` gives a shell (plus overrides), PATH without the venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(state.env)
    env.update(PATH=_path_without_venv(), PYTHONPATH=str(REPO), **overrides)
    return env


def _ray_run(env: dict[str, str], *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "marin_assets.run.ray_run", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _row(table: str, job_id: str) -> list[str]:
    for line in table.splitlines():
        if line.startswith(job_id + " "):
            return line.split()
    raise AssertionError(f"{job_id} not in\n{table}")


def test_deployed_jobs_api_wants_the_token(deployed_ray):
    url = deployed_ray.env["RAY_API_SERVER_ADDRESS"]
    assert url.startswith("http://127.0.0.1:")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{url}/api/jobs/", timeout=10)
    assert info.value.code == 401
    token = Path(deployed_ray.env["RAY_AUTH_TOKEN_PATH"]).read_text().strip()
    request = urllib.request.Request(f"{url}/api/jobs/", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    # The Jobs API is on loopback only: this machine's other addresses do not answer.
    port = int(url.rpartition(":")[2])
    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family == socket.AF_INET and not addr.address.startswith("127."):
                with pytest.raises(OSError), socket.create_connection((addr.address, port), timeout=5):
                    pass


@pytest.mark.timeout(600)
def test_failed_job_over_ray_address_gives_its_exit_code_project_python_and_no_secret(deployed_ray):
    # As documented: after `eval "$(local_deploy.sh env)"`, RAY_ADDRESS is ray://...; here --address
    # names the same cluster's Ray Client address, which maps to its dashboard.
    env = _shell_env(deployed_ray)
    script = (
        "import json, os, sys; k = os.environ['TLS_KEY']; print('python', sys.executable); "
        "print(k); print(repr(k)); print(json.dumps({'key': k})); sys.exit(3)"
    )
    address = deployed_ray.env["RAY_ADDRESS"]
    assert address.startswith("ray://")
    result = _ray_run(env, "--address", address, "-e", "TLS_KEY", PEM, "--", "python", "-c", script)
    out = result.stdout + result.stderr
    assert result.returncode == 3, out[-3000:]
    job_id = json.loads(result.stdout.splitlines()[0])["submitted"]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"job": job_id, "status": "FAILED", "exit_code": 3}
    assert f"ray_run: job {job_id} FAILED, exit code 3" in result.stderr
    assert f"python {VENV_BIN}/python" in result.stdout  # the project's interpreter, not PATH's
    assert [p for p in PEM_PARTS if p in out] == []
    logs = _ray_run(env, "logs", job_id)
    assert logs.returncode == 0 and "python " in logs.stdout
    assert [p for p in PEM_PARTS if p in logs.stdout] == [] and logs.stdout.count("***") >= 3


@pytest.mark.timeout(600)
def test_address_option_wins_list_table_and_stop(deployed_ray):
    # Stale variables of another cluster in the shell: --address must win over both.
    env = _shell_env(deployed_ray, RAY_ADDRESS="ray://127.0.0.1:1", RAY_API_SERVER_ADDRESS="http://127.0.0.1:1")
    address = ["--address", deployed_ray.env["RAY_API_SERVER_ADDRESS"]]
    script = "import time; print('started', flush=True); time.sleep(600)"
    submitted = _ray_run(env, *address, "--no_wait", "--", "python", "-c", script)
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    job_id = json.loads(submitted.stdout.splitlines()[0])["submitted"]
    deadline = time.monotonic() + 240
    while "started" not in _ray_run(env, *address, "logs", job_id).stdout:
        assert time.monotonic() < deadline, "the long job never started"
        time.sleep(3)
    table = _ray_run(env, *address, "list").stdout
    assert table.splitlines()[0].split()[:3] == ["SUBMISSION", "ID", "STATUS"]
    assert _row(table, job_id)[1:3] == ["RUNNING", "-"]
    stopped = _ray_run(env, *address, "stop", job_id)
    assert json.loads(stopped.stdout.strip().splitlines()[-1])["status"] == "STOPPED", stopped.stderr[-2000:]
    assert _row(_ray_run(env, *address, "list").stdout, job_id)[1] == "STOPPED"
    # Without --address the stale variables are used, and that is one clear line, not a traceback.
    lost = _ray_run(env, "list", timeout=120)
    assert lost.returncode == 2 and lost.stderr.strip().count("\n") == 0
    assert lost.stderr.startswith("ray_run: cannot use the Ray Jobs API at http://127.0.0.1:1")
