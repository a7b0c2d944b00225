"""A real ``dagster dev`` for the UI tests: webserver, daemon and code server of this code location.

The fixture starts ``dagster dev -w workspace.yaml`` from the repository root in its own process
group, with a fresh Dagster home (SQLite, telemetry off), a fresh ``MARIN_PREFIX`` and a short
Ray temp dir, waits until ``/server_info`` answers and the ``marin`` location has loaded, and on
teardown stops the whole process group (SIGINT, then SIGKILL) and waits for it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCATION = "marin"
REPOSITORY = "__repository__"
STARTUP_TIMEOUT_S = 90.0
RUN_TIMEOUT_S = 120.0
TERMINAL_RUN_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}

LAUNCH_RUN = """
mutation LaunchRun($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message stack }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PipelineNotFoundError { message }
  }
}
"""

RUN_STATUS = """
query RunStatus($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status jobName tags { key value } }
    ... on RunNotFoundError { message }
    ... on PythonError { message }
  }
}
"""

LATEST_MATERIALIZATIONS = """
query Materializations($key: AssetKeyInput!, $limit: Int) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations(limit: $limit) {
        runId
        timestamp
        metadataEntries {
          label
          __typename
          ... on BoolMetadataEntry { boolValue }
          ... on TextMetadataEntry { text }
          ... on PathMetadataEntry { path }
        }
      }
    }
  }
}
"""

WORKSPACE = """
{
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class DagsterDev:
    """A running ``dagster dev``: where it serves, and the environment it runs with."""

    url: str
    dagster_home: Path
    prefix: Path
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen = field(repr=False)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def graphql(self, query: str, variables: dict[str, Any] | None = None, timeout: float = 30.0) -> dict[str, Any]:
        """POST a GraphQL query; returns ``data`` and fails the test on transport or GraphQL errors."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read())
        assert not payload.get("errors"), f"GraphQL errors: {payload['errors']}"
        return payload["data"]

    def launch_job(self, job_name: str) -> str:
        """Launch ``job_name`` through the ``launchRun`` mutation (what the UI's Materialize does)."""
        params = {
            "selector": {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "jobName": job_name},
            "runConfigData": {},
        }
        result = self.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", f"launchRun failed: {result}"
        return result["run"]["runId"]

    def run(self, run_id: str) -> dict[str, Any]:
        result = self.graphql(RUN_STATUS, {"runId": run_id})["runOrError"]
        assert result["__typename"] == "Run", result
        return result

    def wait_for_run(self, run_id: str, timeout: float = RUN_TIMEOUT_S) -> dict[str, Any]:
        """Poll the run until it reaches a terminal status; fails on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run["status"] in TERMINAL_RUN_STATUSES:
                return run
            if time.monotonic() > deadline:
                pytest.fail(f"run {run_id} still {run['status']} after {timeout}s\n{self.log_tail()}")
            time.sleep(0.5)

    def materializations(self, asset_path: list[str], limit: int = 10) -> list[dict[str, Any]]:
        """The asset's materializations, newest first."""
        result = self.graphql(LATEST_MATERIALIZATIONS, {"key": {"path": asset_path}, "limit": limit})["assetOrError"]
        assert result["__typename"] == "Asset", f"{asset_path}: {result}"
        return result["assetMaterializations"]


def metadata_of(materialization: dict[str, Any]) -> dict[str, Any]:
    """label -> value (bool, text or path) of one materialization's metadata entries."""
    out: dict[str, Any] = {}
    for entry in materialization["metadataEntries"]:
        for key in ("boolValue", "text", "path"):
            if key in entry:
                out[entry["label"]] = entry[key]
                break
        else:
            out[entry["label"]] = entry["__typename"]
    return out


def _server_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=2) as response:
            return response.status == 200 and b"dagster_webserver_version" in response.read()
    except (urllib.error.URLError, OSError):
        return False


def _stop_process_group(process: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGINT the whole group (dagster dev shuts its children down), SIGKILL whatever is left."""
    try:
        pgid = os.getpgid(process.pid)
    except ProcessLookupError:
        process.wait()
        return
    for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if process.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(0.2)
    process.wait(timeout=10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reset_signals() -> None:
    # A non-interactive parent may ignore SIGINT/SIGTERM, and children inherit SIG_IGN:
    # without this, dagster dev would not stop on the signals below.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="module")
def dagster_dev(tmp_path_factory, request) -> Iterator[DagsterDev]:
    """``dagster dev -w workspace.yaml -p <free port>`` on a fresh instance and prefix (one per test module)."""
    base = tmp_path_factory.mktemp("dagster_ui")
    home = base / "dagster_home"
    home.mkdir()
    # A test module may add instance settings (e.g. the run queue) as ``DAGSTER_INSTANCE_YAML``
    # and serve another code location (still named ``marin``) as ``DAGSTER_WORKSPACE_YAML``.
    extra = getattr(request.module, "DAGSTER_INSTANCE_YAML", "")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n" + extra)
    workspace = "workspace.yaml"
    if getattr(request.module, "DAGSTER_WORKSPACE_YAML", None):
        workspace = str(base / "workspace.yaml")
        Path(workspace).write_text(request.module.DAGSTER_WORKSPACE_YAML)
    prefix = base / "prefix"
    prefix.mkdir()
    ray_tmp = f"/tmp/mru-{os.getpid()}"  # short: Ray's socket paths must stay under 107 bytes
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "MARIN_PREFIX": str(prefix),
        "MARIN_RAY_TMPDIR": ray_tmp,
        "PYTHONUNBUFFERED": "1",
        # A test module may set more variables, e.g. ``MARIN_QUICKSTART_SIZE`` (``DAGSTER_ENV``).
        **getattr(request.module, "DAGSTER_ENV", {}),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = base / "dagster_dev.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_reset_signals,
        )
    server = DagsterDev(url=url, dagster_home=home, prefix=prefix, env=env, log_path=log_path, process=process)
    try:
        _wait_until_loaded(server)
        yield server
    finally:
        _stop_process_group(process)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _wait_until_loaded(server: DagsterDev) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not _server_ready(server.url):
        if server.process.poll() is not None:
            pytest.fail(f"dagster dev exited with {server.process.returncode}\n{server.log_tail()}")
        if time.monotonic() > deadline:
            pytest.fail(f"dagster dev did not answer /server_info within {STARTUP_TIMEOUT_S}s\n{server.log_tail()}")
        time.sleep(0.5)
    # /server_info answers before the code location has loaded: wait for it too.
    while True:
        entries = server.graphql(WORKSPACE)["workspaceOrError"]["locationEntries"]
        entry = next((e for e in entries if e["name"] == LOCATION), None)
        if entry is not None and entry["loadStatus"] == "LOADED":
            error = entry["locationOrLoadError"]
            assert error["__typename"] == "RepositoryLocation", f"code location failed to load: {error}"
            return
        if time.monotonic() > deadline:
            pytest.fail(f"code location {LOCATION!r} not loaded within {STARTUP_TIMEOUT_S}s: {entries}")
        time.sleep(0.5)
