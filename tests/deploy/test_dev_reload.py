"""``dagster dev -w workspace.yaml`` reloads a team's edited scripts (*Reload definitions*).

``dagster dev`` starts the code server itself and replaces it on a reload, so an edited
``versioned(...)`` value is served as a new code version on the same key, and a new script appears
-- as on the production topology (``tests/deploy/test_reload.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from tests.deploy.test_reload import NEW_SCRIPT, TRAIN_SCRIPT, _write_project
from tests.ui.conftest import DagsterDev, dagster_dev  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
PROJECT = Path(tempfile.gettempdir()) / f"marin-dev-reload-{os.getpid()}"
DAGSTER_ENV = {"MARIN_PROJECT_ROOT": str(PROJECT), "PYTHONPATH": os.pathsep.join([str(PROJECT), str(REPO)])}
ASSET_NODES = "{ assetNodes { assetKey { path } groupName opVersion } }"
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "marin") {
  __typename ... on WorkspaceLocationEntry { loadStatus } ... on PythonError { message } } }
"""


@pytest.fixture(scope="module", autouse=True)
def _project():
    shutil.rmtree(PROJECT, ignore_errors=True)
    _write_project(PROJECT, "0.001")
    yield
    shutil.rmtree(PROJECT, ignore_errors=True)


def _versions(server: DagsterDev) -> dict[str, tuple[str, str]]:
    nodes = server.graphql(ASSET_NODES)["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): (n["groupName"], n["opVersion"]) for n in nodes}


def test_dagster_dev_serves_an_edit_and_a_new_script_after_reload(dagster_dev: DagsterDev):  # noqa: F811
    model = asset_key_for("checkpoints/team_model").to_user_string()
    probe = asset_key_for("evaluation/team_probe").to_user_string()
    before = _versions(dagster_dev)
    assert before[model][0] == "team_train" and probe not in before
    (PROJECT / "experiments" / "team_train.py").write_text(TRAIN_SCRIPT.format(lr="0.002"))
    (PROJECT / "experiments" / "team_new.py").write_text(NEW_SCRIPT)
    result = dagster_dev.graphql(RELOAD, timeout=300)["reloadRepositoryLocation"]
    assert result["__typename"] == "WorkspaceLocationEntry", result
    after = _versions(dagster_dev)
    assert after[model][1] != before[model][1]  # a new code version on the same key
    docs = asset_key_for("documents/team_docs").to_user_string()
    assert after[docs] == before[docs]
    assert after[probe][0] == "team_new"
