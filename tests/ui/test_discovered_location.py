"""A researchers' experiments folder served by a real ``dagster dev``: every script is a group.

The code location is this repository's ``definitions.py``; ``MARIN_PROJECT_ROOT`` points it at
``tests/discovery/project`` whose ``pyproject.toml`` lists ``experiments/*.py``: a training script,
a curation script with partitions (no partition source given: the one its raw step declares, the
landing zone's drops), a sweep sharing
the training script's model, and a script that raises on import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.execution import StepGraph
from tests.conftest import LAUNCH_RUN
from tests.team_modules import team_experiments
from tests.ui.conftest import LOCATION, REPO_ROOT, REPOSITORY, DagsterDev, metadata_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

PROJECT = REPO_ROOT / "tests" / "discovery" / "project"

ASSET_NODES = """
{
  assetNodes { assetKey { path } groupName opVersion description }
}
"""

ALL_ASSETS = """
{ assetsOrError { ... on AssetConnection { nodes { key { path } } } } }
"""


@pytest.fixture(scope="module", autouse=True)
def _project(tmp_path_factory):
    """Point the code location (and the command-line runs below) at the test project."""
    saved = {k: os.environ.get(k) for k in ("MARIN_PROJECT_ROOT", "MARIN_EXPERIMENTS", "MAIN_BLOCK_MARKER")}
    os.environ["MARIN_PROJECT_ROOT"] = str(PROJECT)
    os.environ.pop("MARIN_EXPERIMENTS", None)
    marker = tmp_path_factory.mktemp("marker") / "main_block_ran"
    os.environ["MAIN_BLOCK_MARKER"] = str(marker)
    yield marker
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _engine_nodes(prefix: Path) -> dict[str, object]:
    with team_experiments(PROJECT):
        from experiments import sweep_small, train_small

        graph = StepGraph([train_small.evaluation, *sweep_small.RUNS], str(prefix))
    # The model's two configs are keyed by the script and variable holding each (not by hash).
    variants = {
        graph.resolved(train_small.model).hash: "train_small_model",
        graph.resolved(sweep_small.RUNS[1]).hash: "sweep_small_RUNS_1",
    }
    return {
        (f"checkpoints/small_model__{variants[node.hash]}" if node.name == "checkpoints/small" else node.name): node
        for node in graph.topological()
    }


def test_groups_code_versions_error_and_a_ui_materialization_through_the_engine(dagster_dev: DagsterDev, _project):
    nodes = {"/".join(n["assetKey"]["path"]): n for n in dagster_dev.graphql(ASSET_NODES)["assetNodes"]}
    groups = {n["groupName"] for n in nodes.values()}
    assert {"train_small", "sweep_small", "curation_web", "broken_import"} <= groups, groups
    # The broken script is its group's error, traceback included; the other three loaded.
    error = nodes["experiment_errors/broken_import"]
    assert error["groupName"] == "broken_import"
    assert "broken on purpose" in error["description"] and "Traceback" in error["description"]
    assert any(n["groupName"] == "curation_web" and n["assetKey"]["path"][-1] == "raw" for n in nodes.values())
    # Code versions are the engine's hashes.
    for name, node in _engine_nodes(dagster_dev.prefix).items():
        served = nodes[name if "__" in name else asset_key_for(name).to_user_string()]
        assert served["opVersion"] == node.hash, name
    assert not _project.exists(), "a script's main block ran in the code location"

    # Materialize the training script's evaluation from the UI's GraphQL: the engine computes it.
    key = asset_key_for("evaluation/small")
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": key.path}],
        },
        "runConfigData": {},
    }
    launched = dagster_dev.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run = dagster_dev.wait_for_run(launched["run"]["runId"])
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()
    metadata = metadata_of(dagster_dev.materializations(key.path, limit=1)[0])
    assert metadata["marin/action"] == "ran"
    evaluation = _engine_nodes(dagster_dev.prefix)["evaluation/small"]
    assert metadata["dagster/uri"] == evaluation.output_path
    status = json.loads(Path(evaluation.output_path, ".executor_status").read_text())
    assert status["status"] == "SUCCESS"

    # The command line afterwards: same status files (cached), recorded on the same asset keys.
    result = subprocess.run(
        [sys.executable, "-m", "experiments.train_small", "--prefix", str(dagster_dev.prefix)],
        cwd=PROJECT,
        env={**dagster_dev.env, "PYTHONPATH": f"{PROJECT}{os.pathsep}{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["cached"] == 4 and summary["ran"] == 0, summary
    assert "not defined in the code location" not in result.stderr
    latest = metadata_of(dagster_dev.materializations(key.path, limit=1)[0])
    assert latest["marin/action"] == "cached" and latest["dagster/uri"] == evaluation.output_path
    instance_keys = dagster_dev.graphql(ALL_ASSETS)["assetsOrError"]["nodes"]
    undefined = {"/".join(a["key"]["path"]) for a in instance_keys} - set(nodes)
    assert not undefined, f"the command-line run recorded asset keys the location does not define: {undefined}"
