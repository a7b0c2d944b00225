"""Issue 36 through GraphQL under a real ``dagster dev`` (``tests/ui/watched_location.py``).

* **Staleness of inputs brought along**: ``launchRun`` of ``evaluate`` alone brings ``prep``,
  ``features`` and ``train`` along; all four are FRESH. Editing ``prep``'s ``versioned(1)`` to
  ``versioned(2)`` and reloading (``reloadRepositoryLocation``, the UI's *Reload definitions*)
  makes ``staleStatus`` STALE for all four, not only ``evaluate``.
* **A bar per watched step**: a run of the whole chain has ``train`` as a step of its own in the
  run (``stepStats``: its own status, start and end), between the packed ops before and after it.
* **Terminate cancels the Ray task**: ``terminateRun`` of a run of the training-like ``long/train``
  (a Ray task that beats until stopped) cancels the run and the task's process ends.
* **A real browser**: the run page of the mixed run shows the watched step's op with its duration.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import psutil
import pytest

import tests.ui.test_browser as browser_tests
from tests.conftest import launch_assets
from tests.ui.conftest import LOCATION, DagsterDev
from tests.ui.test_browser import open_page, screenshot
from tests.ui.test_edit_reload_plots import RELOAD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

browser = browser_tests.browser
ui = browser_tests.ui

_STATE = Path(os.environ.get("TMPDIR", "/tmp")) / f"marin-watched-{os.getpid()}"
_STATE.mkdir(parents=True, exist_ok=True)
VERSION_FILE = _STATE / "prep_version"
VERSION_FILE.write_text("1")
BEAT_DIR = _STATE / "beat"

DAGSTER_WORKSPACE_YAML = f"""
load_from:
  - python_file:
      relative_path: {Path(__file__).with_name("watched_location.py")}
      location_name: {LOCATION}
      working_directory: {Path(__file__).resolve().parents[2]}
"""
DAGSTER_ENV = {
    "MARIN_TEST_PREP_VERSION_FILE": str(VERSION_FILE),
    "MARIN_TEST_BEAT_DIR": str(BEAT_DIR),
    "MARIN_TEST_TRAIN_SECONDS": "3",
}
CHAIN = ("prep", "features", "train", "evaluate")

STALE = """
query Stale($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { __typename ... on AssetNode { staleStatus opVersion } }
}
"""
STEP_STATS = """
query Steps($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run { status stepStats { stepKey status startTime endTime } }
  }
}
"""
TERMINATE = """
mutation Terminate($runId: String!) {
  terminateRun(runId: $runId) { __typename ... on TerminateRunFailure { message } ... on PythonError { message } }
}
"""


def _stale(dagster_dev: DagsterDev) -> dict[str, str]:
    out = {}
    for name in CHAIN:
        node = dagster_dev.graphql(STALE, {"key": {"path": ["team", name]}})["assetNodeOrError"]
        assert node["__typename"] == "AssetNode", node
        out[name] = node["staleStatus"]
    return out


@pytest.fixture(scope="module")
def mixed_run(dagster_dev: DagsterDev) -> str:
    """A run of the whole chain: packed prep/features, train's own op, packed evaluate."""
    run_id = launch_assets(dagster_dev, [["team", n] for n in CHAIN])
    assert dagster_dev.wait_for_run(run_id, timeout=240)["status"] == "SUCCESS", dagster_dev.log_tail()
    return run_id


def test_a_watched_step_is_a_step_of_its_own_in_the_run(dagster_dev: DagsterDev, mixed_run):
    stats = dagster_dev.graphql(STEP_STATS, {"runId": mixed_run})["runOrError"]["stepStats"]
    by_key = {s["stepKey"]: s for s in stats}
    assert set(by_key) == {"marin__steps", "marin__team__train", "marin__steps_l1"}, by_key
    train = by_key["marin__team__train"]
    assert train["status"] == "SUCCESS" and train["endTime"] - train["startTime"] >= 3.0, train
    # The packed ops run before and after it, as the chain says.
    assert by_key["marin__steps"]["endTime"] <= train["startTime"] <= by_key["marin__steps_l1"]["startTime"]


def test_inputs_brought_along_turn_stale_after_an_edit_and_reload(dagster_dev: DagsterDev, mixed_run):
    run_id = launch_assets(dagster_dev, [["team", "evaluate"]])
    assert dagster_dev.wait_for_run(run_id, timeout=240)["status"] == "SUCCESS", dagster_dev.log_tail()
    assert _stale(dagster_dev) == dict.fromkeys(CHAIN, "FRESH")
    VERSION_FILE.write_text("2")  # prep's versioned(1) -> versioned(2)
    result = dagster_dev.graphql(RELOAD, {"name": LOCATION})["reloadRepositoryLocation"]
    assert result["locationOrLoadError"]["__typename"] == "RepositoryLocation", result
    assert _stale(dagster_dev) == dict.fromkeys(CHAIN, "STALE")


def test_terminating_a_watched_step_cancels_its_ray_task(dagster_dev: DagsterDev):
    run_id = launch_assets(dagster_dev, [["long", "train"]])
    deadline = time.monotonic() + 180
    while not (BEAT_DIR / "pid").exists():
        assert time.monotonic() < deadline, f"the Ray task never started\n{dagster_dev.log_tail()}"
        assert dagster_dev.run(run_id)["status"] not in ("FAILURE", "SUCCESS"), dagster_dev.log_tail()
        time.sleep(0.5)
    pid = int((BEAT_DIR / "pid").read_text())
    assert psutil.pid_exists(pid)
    result = dagster_dev.graphql(TERMINATE, {"runId": run_id})["terminateRun"]
    assert result["__typename"] == "TerminateRunSuccess", result
    assert dagster_dev.wait_for_run(run_id, timeout=120)["status"] == "CANCELED"
    deadline = time.monotonic() + 60
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"the step's Ray task (pid {pid}) still runs after its run was terminated"
        time.sleep(0.5)


def test_run_page_draws_the_watched_step_as_its_own_bar(ui, dagster_dev: DagsterDev, mixed_run, tmp_path):
    text = open_page(ui, f"{dagster_dev.url}/runs/{mixed_run}", "RUN_SUCCESS", "marin__team__train")
    screenshot(ui, tmp_path, "mixed_run")
    # The gantt chart and the step list name each op; the watched one with its duration.
    for op in ("marin__steps", "marin__team__train", "marin__steps_l1"):
        assert op in text, text[:3000]
    assert re.search(r"marin__team__train[\s\S]{0,300}?(\d+(\.\d+)?\s?s\b|\d+:\d\d)", text), text[:3000]
