"""The local topology's Dagster processes: the code server (it reloads), the webserver and the daemon.

Part of ``scripts/local_deploy.sh`` (:mod:`marin_resources.deploy.local`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from typing import Any

from marin_resources.deploy import services
from marin_resources.deploy.services import DeployError, DeployState, Service

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOCATION_NAME = "marin"


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def write_workspace(state_dir: str, code_port: int) -> str:
    path = os.path.join(state_dir, "workspace.yaml")
    with open(path, "w") as handle:
        handle.write(
            "load_from:\n"
            f"  - grpc_server:\n      host: 127.0.0.1\n      port: {code_port}\n      location_name: {LOCATION_NAME}\n"
        )
    return path


def wait_http(url: str, what: str, log: str, timeout_s: float, pid: int) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if not services.group_processes(pid):
            raise DeployError(f"{what} exited; see {log}:\n{services._tail(log)}")
        time.sleep(0.5)
    raise DeployError(f"{what} did not answer {url} within {timeout_s:.0f}s; see {log}")


def code_server_command(port: int) -> list[str]:
    """``dagster code-server start`` serving ``definitions.py`` on 127.0.0.1:``port``.

    Not ``dagster api grpc``: a server started that way cannot reload (*Reload definitions* keeps
    its old definitions while runs import the new code). ``code-server start`` keeps one proxy
    process on the port and loads the code in a child it replaces on every reload, so an edited
    team script shows its new code version within seconds -- what the Helm values' ``codeServerArgs``
    run in the user-code pod.
    """
    return [
        _bin("dagster"),
        "code-server",
        "start",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "--python-file",
        os.path.join(REPO, "definitions.py"),
        "--working-directory",
        REPO,
        "--location-name",
        LOCATION_NAME,
    ]


def start_code_server(state: DeployState, env: dict[str, str], log_dir: str) -> Service:
    """Start the code server, record it in ``state`` and wait until it listens."""
    port = state.ports["code_server"]
    code = services.start_service("code-server", code_server_command(port), env, log_dir, cwd=REPO)
    code.port = port
    state.services.append(code)
    state.save()
    services.wait_for_port(port, "code server", code.log, 180, code.pid)
    return code


RELOAD_LOCATION = """
mutation Reload($name: String!) {
  reloadRepositoryLocation(repositoryLocationName: $name) {
    __typename
    ... on WorkspaceLocationEntry {
      loadStatus
      locationOrLoadError { __typename ... on PythonError { message } }
    }
    ... on PythonError { message }
    ... on UnauthorizedError { message }
    ... on ReloadNotSupported { message }
    ... on RepositoryLocationNotFound { message }
  }
}
"""


def _graphql(url: str, query: str, variables: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        payload = json.loads(response.read())
    if payload.get("errors"):
        raise DeployError(f"GraphQL errors from {url}: {payload['errors']}")
    return payload["data"]


def reload_location(state: DeployState, timeout_s: float = 300) -> dict[str, Any]:
    """*Reload definitions* of the code location, as the UI's button does (GraphQL
    ``reloadRepositoryLocation`` on the webserver); returns the location entry once it is loaded.

    The code server loads the edited scripts in a fresh child process; the webserver (and the
    daemon, which watches the server) then serve the new definitions. A script that fails to import
    is its group's error, not a failed reload; a location whose entry file fails is (raised).
    """
    url = f"http://127.0.0.1:{state.ports['webserver']}"
    result = _graphql(url, RELOAD_LOCATION, {"name": LOCATION_NAME}, timeout_s)["reloadRepositoryLocation"]
    if result["__typename"] != "WorkspaceLocationEntry":
        raise DeployError(f"reloading {LOCATION_NAME} failed: {result.get('message', result['__typename'])}")
    loaded = result.get("locationOrLoadError") or {}
    if loaded.get("__typename") == "PythonError":
        raise DeployError(f"the code location {LOCATION_NAME} failed to load:\n{loaded['message']}")
    return result


IN_FLIGHT_RUNS = """
query InFlight {
  runsOrError(filter: {statuses: [STARTING, STARTED, CANCELING]}) {
    __typename
    ... on Runs { results { runId jobName status } }
    ... on PythonError { message }
  }
}
"""


def in_flight_runs(state: DeployState, timeout_s: float = 60) -> list[dict[str, Any]]:
    """Runs whose worker is a process of the code server now (starting, started or canceling)."""
    url = f"http://127.0.0.1:{state.ports['webserver']}"
    result = _graphql(url, IN_FLIGHT_RUNS, {}, timeout_s)["runsOrError"]
    if result["__typename"] != "Runs":
        raise DeployError(f"listing the runs in flight failed: {result.get('message', result['__typename'])}")
    return list(result["results"])


def wait_for_in_flight_runs(state: DeployState, wait_s: float, poll_s: float = 2.0) -> list[dict[str, Any]]:
    """Wait up to ``wait_s`` until no run is in flight; returns the runs still in flight then.

    With ``DefaultRunLauncher`` a run's worker is a child of the code server: stopping the server
    interrupts it. Waiting lets every run finish first.
    """
    deadline = time.monotonic() + wait_s
    runs = in_flight_runs(state)
    announced = False
    while runs and time.monotonic() < deadline:
        if not announced:
            names = ", ".join(f"{r['runId'][:8]} ({r['jobName']})" for r in runs)
            print(f"waiting up to {wait_s:.0f}s for {len(runs)} run(s) in flight: {names}", flush=True)
            announced = True
        time.sleep(poll_s)
        runs = in_flight_runs(state)
    return runs


RUN_TAGS = """
query RunTags($runId: ID!) {
  runOrError(runId: $runId) {
    __typename
    ... on Run { runId status tags { key value } }
    ... on RunNotFoundError { message }
    ... on PythonError { message }
  }
}
"""

REEXECUTE_FROM_FAILURE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchRunReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on Error { message }
  }
}
"""

# Dagster's own tags of its automatic run retry (``dagster._core.storage.tags``): set on a failed run
# when the instance's ``run_retries`` will retry it, and the id of the retry once the daemon launched it.
WILL_RETRY_TAG = "dagster/will_retry"
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"
RETRIED_BY_TAG = "marin/retry_of_interrupted_run"
TERMINAL_STATUSES = {"SUCCESS", "FAILURE", "CANCELED"}


def _run_tags(url: str, run_id: str) -> tuple[str, dict[str, str]]:
    result = _graphql(url, RUN_TAGS, {"runId": run_id}, 60)["runOrError"]
    if result["__typename"] != "Run":
        raise DeployError(f"reading run {run_id} failed: {result.get('message', result['__typename'])}")
    return result["status"], {t["key"]: t["value"] for t in result["tags"]}


def retry_interrupted_runs(
    state: DeployState, run_ids: list[str], timeout_s: float = 180, daemon_grace_s: float = 60, poll_s: float = 1.0
) -> dict[str, str]:
    """Make sure every run a code-server restart interrupted is re-executed from failure once.

    Dagster's daemon retries a run whose worker was interrupted (the instance's ``run_retries``),
    but it tries at once, while the code server restarts: then it cannot reach the location, marks
    the run ``will_retry=false`` and never tries again. So, with the new server up: a run the daemon
    retried is left to that retry; one it gave up on (or never meant to retry: ``run_retries``
    off, or no decision within ``daemon_grace_s``) is re-executed from failure here, as the UI's
    *Re-execute from failure* does, tagged ``marin/retry_of_interrupted_run``. Returns each
    interrupted run's retry id (a run that ended otherwise -- it succeeded -- has none).
    """
    url = f"http://127.0.0.1:{state.ports['webserver']}"
    retries: dict[str, str] = {}
    for run_id in run_ids:
        deadline = time.monotonic() + timeout_s
        status, tags = _run_tags(url, run_id)
        while status not in TERMINAL_STATUSES:  # the worker is gone; Dagster writes its failure
            if time.monotonic() > deadline:
                raise DeployError(f"run {run_id} is still {status} {timeout_s:.0f}s after its worker was stopped")
            time.sleep(poll_s)
            status, tags = _run_tags(url, run_id)
        if status != "FAILURE":
            continue
        decided = time.monotonic() + daemon_grace_s
        while AUTO_RETRY_RUN_ID_TAG not in tags and tags.get(WILL_RETRY_TAG) != "false":
            if time.monotonic() > decided:
                break
            time.sleep(poll_s)
            _, tags = _run_tags(url, run_id)
        if AUTO_RETRY_RUN_ID_TAG in tags:
            retries[run_id] = tags[AUTO_RETRY_RUN_ID_TAG]
            print(f"run {run_id}: interrupted; Dagster's run retry re-executes it as {retries[run_id]}", flush=True)
            continue
        params = {
            "parentRunId": run_id,
            "strategy": "FROM_FAILURE",
            "extraTags": [{"key": RETRIED_BY_TAG, "value": run_id}],
        }
        launched = _graphql(url, REEXECUTE_FROM_FAILURE, {"params": params}, 120)["launchRunReexecution"]
        if launched["__typename"] != "LaunchRunSuccess":
            raise DeployError(f"re-executing the interrupted run {run_id} failed: {launched}")
        retries[run_id] = launched["run"]["runId"]
        why = "Dagster's run retry gave up on it" if tags.get(WILL_RETRY_TAG) == "false" else "no run retry took it"
        print(f"run {run_id}: interrupted; {why}, re-executed from failure as {retries[run_id]}", flush=True)
    return retries
