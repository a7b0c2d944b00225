"""The loss of the quickstart's checkpoint on the asset's *Plots*, in a real (headless) Chromium.

``dagster dev`` serves the location with the test-size quickstart (``MARIN_QUICKSTART_SIZE=test``).
The checkpoint is materialized twice: once by a command-line run of the quickstart up to the model
(recorded in the instance, as a user's ``executor_main`` run is), once with the asset page's
*Materialize* button, confirmed (a Dagster run that finds the step done). Each materialization carries the
train and eval loss as numeric metadata, so the asset overview's Metadata switched from *Table* to
*Plots* draws one chart per series across the two materializations.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

import tests.ui.test_browser as browser_tests
from tests.ui.conftest import REPO_ROOT, DagsterDev
from tests.ui.test_browser import PAGE_TIMEOUT_S, body_text, click_button, open_page, screenshot, wait_for_text

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# The headless Chromium fixtures of test_browser (module-scoped: one browser here too).
browser = browser_tests.browser
ui = browser_tests.ui

DAGSTER_ENV = {"MARIN_QUICKSTART_SIZE": "test"}
CHECKPOINT = ["checkpoints", "quickstart_test_model"]
# The numeric loss metadata of a training step (marin_assets/training): last train loss, last eval loss.
LOSS_SERIES = ("final_loss", "eval_loss")
FLOAT_METADATA = """
query Loss($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset { assetMaterializations(limit: 10) { runId timestamp
                   metadataEntries { label __typename ... on FloatMetadataEntry { floatValue } } } }
  }
}
"""


def _loss_points(dagster_dev: DagsterDev) -> list[dict[str, float]]:
    """Per materialization (newest first): the float value of each loss series it carries."""
    asset = dagster_dev.graphql(FLOAT_METADATA, {"key": {"path": CHECKPOINT}})["assetOrError"]
    assert asset["__typename"] == "Asset", asset
    return [
        {e["label"]: e["floatValue"] for e in m["metadataEntries"] if e["__typename"] == "FloatMetadataEntry"}
        for m in asset["assetMaterializations"]
    ]


@pytest.fixture(scope="module")
def command_line_checkpoint(dagster_dev: DagsterDev) -> None:
    """The first materialization: the quickstart (test size) up to the model, from the command line."""
    cmd = [sys.executable, "-m", "marin_assets.experiments.quickstart", "--size", "test"]
    cmd += ["--sample_docs", "120", "--sample_drops", "2", "--run_only", "^checkpoints/quickstart-test$"]
    env = {**dagster_dev.env, "PYTHONPATH": str(REPO_ROOT)}
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1100)
    print(f"\n[plots] quickstart (test size) up to the model: {time.monotonic() - start:.1f}s")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    points = _loss_points(dagster_dev)
    assert len(points) == 1 and all(key in points[0] for key in LOSS_SERIES), points


def test_checkpoint_plots_show_the_loss_series_of_two_materializations(
    ui, dagster_dev: DagsterDev, command_line_checkpoint, tmp_path
):
    from selenium.webdriver.common.by import By

    asset_url = f"{dagster_dev.url}/assets/{'/'.join(CHECKPOINT)}"
    # The second materialization: the asset page's Materialize button.
    open_page(ui, asset_url, "Materialize", "final_loss")
    click_button(ui, "Materialize")
    # The command line recorded the model only (--run_only): the UI asks before materializing it
    # alone, since its upstream assets show no materialization; the user confirms.
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while "Launched run" not in body_text(ui):
        if "Are you sure?" in body_text(ui):
            click_button(ui, "Confirm")
        if time.monotonic() > deadline:
            pytest.fail(f"no run launched:\n{body_text(ui)[-2000:]}")
        time.sleep(0.3)
    toast = wait_for_text(ui, "Launched run")
    short_id = re.search(r"Launched run ([0-9a-f]{8})", toast)
    assert short_id, toast[:1000]
    runs = dagster_dev.graphql("{ runsOrError(limit: 5) { ... on Runs { results { runId } } } }")
    run_id = next(r["runId"] for r in runs["runsOrError"]["results"] if r["runId"].startswith(short_id.group(1)))
    run = dagster_dev.wait_for_run(run_id, timeout=600)
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()
    points = _loss_points(dagster_dev)
    assert len(points) == 2, points
    for key in LOSS_SERIES:
        values = [p[key] for p in points]
        assert all(0.0 < v < 20.0 for v in values), (key, values)  # a loss of a 1024-token vocabulary

    # The asset overview's Metadata, switched from Table to Plots: one chart per numeric series.
    open_page(ui, asset_url, "Metadata", "Table", "Plots")
    click_button(ui, "Plots")
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        text = body_text(ui)
        charts = ui.find_elements(By.TAG_NAME, "canvas")
        # The leaf texts in one script call: the charts re-render while they load, and an element
        # found by one WebDriver call can be gone by the next (a stale element reference).
        leaves = ui.execute_script(
            "return Array.from(document.querySelectorAll('*'))"
            ".filter(e => e.children.length === 0).map(e => (e.innerText || '').trim());"
        )
        headers = {t for t in leaves if t in LOSS_SERIES}
        if set(LOSS_SERIES) <= headers and len(charts) >= len(LOSS_SERIES):
            break
        if time.monotonic() > deadline:
            screenshot(ui, tmp_path, "plots_missing")
            pytest.fail(f"no chart of {LOSS_SERIES} ({len(charts)} canvas, labels {headers}):\n{text[:3000]}")
        time.sleep(0.5)
    assert "No numeric metadata entries available to be graphed" not in text
    screenshot(ui, tmp_path, "checkpoint_loss_plots")
