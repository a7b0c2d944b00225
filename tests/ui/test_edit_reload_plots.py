"""Edit, reload, re-materialize: one checkpoint key collects every materialization, in a real browser.

``dagster dev`` serves a team folder (``tests/discovery/test_asset_identity.py``'s project: a
checkpoint step whose ``final_loss`` depends on a versioned learning rate). The learning rate is
edited twice; after each edit the GraphQL ``reloadRepositoryLocation`` (the UI's *Reload
definitions*) shows the new code version on the same key, stale until materialized. After three
materializations the asset's *Plots* draw the ``final_loss`` series on that one key.
"""

from __future__ import annotations

import os
import time

import pytest

import tests.ui.test_browser as browser_tests
from tests.discovery.test_asset_identity import write_project
from tests.ui.conftest import LAUNCH_RUN, LOCATION, REPOSITORY, DagsterDev
from tests.ui.test_browser import PAGE_TIMEOUT_S, body_text, click_button, open_page, screenshot

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

browser = browser_tests.browser
ui = browser_tests.ui

CHECKPOINT = ["checkpoints", "team_tiny_model"]
DOCUMENTS = ["documents", "team"]

RELOAD = """
mutation Reload($name: String!) {
  reloadRepositoryLocation(repositoryLocationName: $name) {
    __typename
    ... on WorkspaceLocationEntry { loadStatus locationOrLoadError { __typename ... on PythonError { message } } }
    ... on PythonError { message }
  }
}
"""

NODE = """
query Node($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) {
    __typename
    ... on AssetNode { opVersion staleStatus groupName }
  }
}
"""

LOSSES = """
query Loss($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset { assetMaterializations(limit: 10) { tags { key value }
                   metadataEntries { label __typename ... on FloatMetadataEntry { floatValue } } } }
  }
}
"""


@pytest.fixture(scope="module", autouse=True)
def team(tmp_path_factory):
    """The team folder the location serves (set before ``dagster dev`` starts)."""
    root = tmp_path_factory.mktemp("team")
    write_project(root, sweep_lrs=None)
    saved = {k: os.environ.get(k) for k in ("MARIN_PROJECT_ROOT", "MARIN_EXPERIMENTS")}
    os.environ["MARIN_PROJECT_ROOT"] = str(root)
    os.environ.pop("MARIN_EXPERIMENTS", None)
    yield root
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _node(dagster_dev: DagsterDev) -> dict:
    node = dagster_dev.graphql(NODE, {"key": {"path": CHECKPOINT}})["assetNodeOrError"]
    assert node["__typename"] == "AssetNode", node
    return node


def _reload(dagster_dev: DagsterDev) -> None:
    result = dagster_dev.graphql(RELOAD, {"name": LOCATION})["reloadRepositoryLocation"]
    assert result["__typename"] == "WorkspaceLocationEntry", result
    assert result["locationOrLoadError"]["__typename"] == "RepositoryLocation", result


def _materialize(dagster_dev: DagsterDev) -> None:
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": DOCUMENTS}, {"path": CHECKPOINT}],
        },
        "runConfigData": {},
    }
    launched = dagster_dev.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run = dagster_dev.wait_for_run(launched["run"]["runId"], timeout=300)
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()


def test_two_edits_three_materializations_plot_on_one_key(ui, dagster_dev: DagsterDev, team, tmp_path):
    from selenium.webdriver.common.by import By

    code_versions = []
    for lr in (1e-3, 2e-3, 4e-3):  # the original, then two edits of the versioned learning rate
        if code_versions:
            write_project(team, lr=lr, sweep_lrs=None)
            _reload(dagster_dev)
            node = _node(dagster_dev)
            assert node["opVersion"] != code_versions[-1], "the reload kept the old code version"
            assert node["staleStatus"] == "STALE", node
        node = _node(dagster_dev)
        assert node["groupName"] == "z_team"
        code_versions.append(node["opVersion"])
        _materialize(dagster_dev)
        assert _node(dagster_dev)["staleStatus"] == "FRESH"

    materializations = dagster_dev.graphql(LOSSES, {"key": {"path": CHECKPOINT}})["assetOrError"][
        "assetMaterializations"
    ]
    assert len(materializations) == 3
    recorded_versions = {t["value"] for m in materializations for t in m["tags"] if t["key"] == "dagster/code_version"}
    assert recorded_versions == set(code_versions) and len(recorded_versions) == 3
    losses = [e["floatValue"] for m in materializations for e in m["metadataEntries"] if e["label"] == "final_loss"]
    assert len(losses) == 3 and len(set(losses)) == 3, losses

    # The asset's Metadata switched to Plots: the final_loss chart of the one key.
    asset_url = f"{dagster_dev.url}/assets/{'/'.join(CHECKPOINT)}"
    open_page(ui, asset_url, "Metadata", "Plots")
    click_button(ui, "Plots")
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        charts = ui.find_elements(By.TAG_NAME, "canvas")
        leaves = ui.execute_script(
            "return Array.from(document.querySelectorAll('*'))"
            ".filter(e => e.children.length === 0).map(e => (e.innerText || '').trim());"
        )
        if "final_loss" in leaves and charts:
            break
        if time.monotonic() > deadline:
            screenshot(ui, tmp_path, "plots_missing")
            pytest.fail(f"no final_loss chart ({len(charts)} canvas):\n{body_text(ui)[:3000]}")
        time.sleep(0.5)
    screenshot(ui, tmp_path, "edited_checkpoint_plots")
