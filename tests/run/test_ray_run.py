"""``ray_run`` against a real local Ray cluster (head + worker, token authentication on)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from marin_assets.execution.status import read_status

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SECRET = "s3cr3t-Value-4242"


def _submitted(stdout: str) -> str:
    first = json.loads(stdout.splitlines()[0])
    return first["submitted"]


def _status(ray_cluster, job_id: str) -> str:
    for line in ray_cluster.ray_run("list", "--json").stdout.splitlines():
        job = json.loads(line)
        if job["submission_id"] == job_id:
            return job["status"]
    raise AssertionError(f"{job_id} not listed")


def test_jobs_api_requires_the_token(ray_cluster):
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{ray_cluster.dashboard_url}/api/jobs/", timeout=10)
    assert info.value.code == 401
    assert Path(ray_cluster.home, ".ray", "auth_token").is_file()


@pytest.mark.timeout(600)
def test_hello_world_runs_as_a_job_and_writes_its_outputs(ray_cluster, tmp_path):
    prefix = tmp_path / "prefix"
    command = ["python", "-m", "marin_assets.experiments.hello_world", "--prefix", str(prefix), "--no_record"]
    result = ray_cluster.ray_run("-e", "MARIN_TEST_SECRET", SECRET, "--", *command, timeout=540)
    out = result.stdout + result.stderr
    job_id = _submitted(result.stdout)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"job": job_id, "status": "SUCCEEDED", "exit_code": 0}
    assert '"ran": 2' in out  # executor_main's summary, followed from the job's log
    assert SECRET not in out

    logs = ray_cluster.ray_run("logs", job_id).stdout
    assert "experiment record" in logs and '"ran": 2' in logs
    stats = list(prefix.glob("hello_world/stats-*/stats.json"))
    assert len(stats) == 1 and json.loads(stats[0].read_text())["count"] == 1000
    assert read_status(str(stats[0].parent)).status == "SUCCESS"

    listed = ray_cluster.ray_run("list").stdout
    assert job_id in listed and SECRET not in listed
    assert _status(ray_cluster, job_id) == "SUCCEEDED"


@pytest.mark.timeout(300)
def test_secret_reaches_the_job_but_not_its_log_or_metadata(ray_cluster, monkeypatch):
    script = "import os; v = os.environ['MARIN_TEST_SECRET']; print('secret is', v, 'of length', len(v))"
    result = ray_cluster.ray_run("-e", "MARIN_TEST_SECRET", SECRET, "--", "python", "-c", script)
    job_id = _submitted(result.stdout)
    assert f"secret is *** of length {len(SECRET)}" in result.stdout
    assert SECRET not in result.stdout + result.stderr
    logs = ray_cluster.ray_run("logs", job_id).stdout
    assert "secret is ***" in logs and SECRET not in logs
    # What Ray itself stores for the job (dashboard, `ray job list`) holds no value either.
    # An embedded Ray started earlier in this pytest process may have set RAY_AUTH_MODE=disabled.
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(Path(ray_cluster.home, ".ray", "auth_token")))
    from marin_assets.run.ray_run import make_client

    info = make_client(ray_cluster.dashboard_url).get_job_info(job_id)
    stored = json.dumps({"rt": info.runtime_env, "md": info.metadata, "ep": info.entrypoint}, default=str)
    assert SECRET not in stored and "MARIN_TEST_SECRET" in stored  # the key is listed, not the value


@pytest.mark.timeout(300)
def test_failed_job_fails_the_command_with_its_exit_code(ray_cluster):
    result = ray_cluster.ray_run("--", "python", "-c", "import sys; print('bye'); sys.exit(3)", check=False)
    assert result.returncode == 3
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert (last["status"], last["exit_code"]) == ("FAILED", 3)
    assert f"job {last['job']} FAILED, exit code 3" in result.stderr
    table = ray_cluster.ray_run("list").stdout  # the table shows it too
    (row,) = [line.split() for line in table.splitlines() if line.startswith(last["job"] + " ")]
    assert row[1:3] == ["FAILED", "3"]


@pytest.mark.timeout(300)
def test_stop_a_long_job(ray_cluster):
    script = "import time; print('started', flush=True); time.sleep(600)"
    result = ray_cluster.ray_run("--no_wait", "--", "python", "-c", script)
    job_id = _submitted(result.stdout)
    deadline = time.monotonic() + 120
    while "started" not in ray_cluster.ray_run("logs", job_id).stdout:
        assert time.monotonic() < deadline, "the long job never started"
        time.sleep(2)
    assert _status(ray_cluster, job_id) == "RUNNING"
    stopped = ray_cluster.ray_run("stop", job_id)
    assert json.loads(stopped.stdout.strip().splitlines()[-1])["status"] == "STOPPED"
    assert _status(ray_cluster, job_id) == "STOPPED"
