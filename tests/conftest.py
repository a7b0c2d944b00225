"""Shared fixtures: every test gets its own Dagster home, Ray temp dir and HF caches (no network).

Shared helpers too, imported by the tests that use them (``from tests.conftest import ...``):
:func:`marin_hash` (Marin's step hash rule), :data:`LAUNCH_RUN` (the GraphQL mutation the UI's
*Materialize* sends), :func:`launch_assets` / :func:`materialized_in` / :func:`first_failure_description`
/ :data:`REEXECUTE` / :func:`latest_materialization` (a UI run of some assets, what it materialized,
its failure, *Re-execute*, an asset's latest metadata; for ``dagster dev`` and the topology alike) and :class:`Topology` / :func:`deploy_topology` (a client of
the topology ``marin deploy up`` started).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import marin_alias
from tests.ui.conftest import LAUNCH_RUN, LOCATION, REPOSITORY, DagsterDev

if TYPE_CHECKING:
    from marin_resources.deploy.services import DeployState

__all__ = [
    "LAUNCH_RUN",
    "REEXECUTE",
    "Topology",
    "deploy_client_env",
    "deploy_topology",
    "first_failure_description",
    "launch_assets",
    "latest_materialization",
    "marin_hash",
    "materialized_in",
]

REPO_ROOT = Path(__file__).resolve().parents[1]

# Marin's names (``marin.*``, ``fray.cluster``, ``experiments.*``) in this process too, as the
# installed ``marin_alias.pth`` gives every interpreter (idempotent when it is installed).
marin_alias.install()

# Nothing may be fetched from the Hugging Face hub at test time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


@pytest.fixture
def prefix(tmp_path) -> str:
    """A fresh output root for one test."""
    path = tmp_path / "prefix"
    path.mkdir()
    return str(path)


@pytest.fixture
def dagster_home(tmp_path, monkeypatch) -> str:
    """A real on-disk Dagster instance directory (SQLite storage) for one test."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return str(home)


@pytest.fixture(scope="session", autouse=True)
def session_ray_tmpdir():
    """One short Ray temp dir for the session; the embedded head started there is stopped at the end.

    Tests and the subprocesses they start inherit ``MARIN_RAY_TMPDIR``, so no Ray is left running
    after the suite (modules with their own cluster use their own temp dir and stop it themselves).
    """
    import tempfile

    previous = os.environ.get("MARIN_RAY_TMPDIR")
    path = tempfile.mkdtemp(prefix="mrt-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = path
    yield path
    try:
        import ray

        ray.shutdown()
        from marin_resources.ray_head import stop_embedded_head

        stop_embedded_head(path)
    finally:
        if previous is None:
            os.environ.pop("MARIN_RAY_TMPDIR", None)
        else:
            os.environ["MARIN_RAY_TMPDIR"] = previous


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """A real GCS API server on 127.0.0.1 that enforces generation preconditions (see tests/gcs_server.py).
    It changes no environment: ``gcs_prefix`` points gcsfs at it for one test at a time."""
    from tests.gcs_server import GcsServer

    server = GcsServer(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log").start()
    yield server
    server.stop()


@pytest.fixture
def gcs_prefix(gcs_server, monkeypatch) -> str:
    """``gs://<fresh bucket>/marin`` on the session's GCS server; gcsfs and subprocesses of this test
    reach it anonymously. The variables are undone after the test, so a later test (a quickstart
    whose job runtime_env would carry ``FSSPEC_GCS_TOKEN``) never inherits them."""
    from tests.gcs_server import point_fsspec_at

    point_fsspec_at(gcs_server, monkeypatch)
    return f"gs://{gcs_server.create_bucket()}/marin"


def marin_hash(version: dict) -> str:
    """Marin's step hash: ``hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]``."""
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchRunReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""

RUN_DETAILS = """
query Run($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run {
      startTime endTime
      stepStats { stepKey status }
      assetMaterializations { assetKey { path } }
    }
  }
}
"""

FAILURE_MESSAGE = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on MessageEvent { message }
        ... on ExecutionStepFailureEvent { error { message } failureMetadata { description } }
      }
    }
  }
}
"""


def launch_assets(server: DagsterDev, paths: list[list[str]]) -> str:
    """``launchRun`` on ``__ASSET_JOB`` for the assets at ``paths`` (what *Materialize selected* sends);
    returns the run id."""
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": p} for p in paths],
        },
        "runConfigData": {},
    }
    launched = server.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def materialized_in(server: DagsterDev, run_id: str) -> set[str]:
    """The asset keys (``a/b``) the run materialized."""
    run = server.graphql(RUN_DETAILS, {"runId": run_id})["runOrError"]
    return {"/".join(m["assetKey"]["path"]) for m in run["assetMaterializations"]}


def first_failure_description(server: DagsterDev, run_id: str) -> str:
    """The description of the run's first step failure (what its run page shows first)."""
    events = server.graphql(FAILURE_MESSAGE, {"runId": run_id})["logsForRun"]["events"]
    failures = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    assert failures, events
    return (failures[0].get("failureMetadata") or {}).get("description") or failures[0]["error"]["message"]


LATEST_MATERIALIZATION = """
query Latest($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        timestamp
        metadataEntries {
          label
          __typename
          ... on JsonMetadataEntry { jsonString }
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
          ... on FloatMetadataEntry { floatValue }
          ... on BoolMetadataEntry { boolValue }
          ... on PathMetadataEntry { path }
          ... on UrlMetadataEntry { url }
        }
      }
    }
  }
}
"""
_METADATA_VALUE_FIELDS = ("text", "intValue", "floatValue", "boolValue", "path", "url")


def latest_materialization(server: DagsterDev, path: list[str]) -> dict | None:
    """The asset's latest materialization as ``{"runId", "timestamp", "metadata": {label: value}}`` (JSON
    entries parsed, other kinds by their value; an entry of another kind by its type name); None
    when it has none."""
    asset = server.graphql(LATEST_MATERIALIZATION, {"key": {"path": path}})["assetOrError"]
    assert asset["__typename"] == "Asset", (path, asset)
    if not asset["assetMaterializations"]:
        return None
    (latest,) = asset["assetMaterializations"]
    metadata = {}
    for entry in latest["metadataEntries"]:
        if "jsonString" in entry:
            metadata[entry["label"]] = json.loads(entry["jsonString"])
        else:
            field = next((f for f in _METADATA_VALUE_FIELDS if f in entry), None)
            metadata[entry["label"]] = entry[field] if field else entry["__typename"]
    return {"runId": latest["runId"], "timestamp": latest["timestamp"], "metadata": metadata}


class Topology(DagsterDev):
    """The started local topology (``marin deploy up``): its webserver's client, with its state."""

    state: DeployState


def deploy_client_env(state: DeployState) -> dict[str, str]:
    """The environment ``marin deploy env`` gives a shell (this repository importable)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MARIN_PREFIX", "DAGSTER_HOME")}
    env.update(state.env)
    with open(os.path.join(state.state_dir, "secrets", "postgres_password")) as handle:
        env["DAGSTER_PG_PASSWORD"] = handle.read().strip()
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def deploy_topology(state: DeployState) -> Topology:
    """A client of the topology recorded in ``state`` (its webserver, environment and log)."""
    webserver = next(s for s in state.services if s.name == "webserver")
    topology = Topology(
        url=f"http://127.0.0.1:{state.ports['webserver']}",
        dagster_home=Path(state.env["DAGSTER_HOME"]),
        prefix=Path("/nonexistent"),
        env=deploy_client_env(state),
        log_path=Path(webserver.log),
        process=None,
    )
    topology.state = state
    return topology
