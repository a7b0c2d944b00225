"""A UI run schedules as ``executor_main`` does, through GraphQL ``launchRun`` on ``__ASSET_JOB``
under a real ``dagster dev`` (what *Materialize all* and a selection send):

* four independent sleeping steps run at the same time (their intervals overlap; the run takes
  about one step's time);
* a failing step leaves its sibling materialized and its descendants not (DEP_FAILED), and the run
  fails naming the failed step with its cause first;
* *Re-execute from failure* (once the cause is gone) runs only the failed and the not-run steps;
* in a real browser, the run page shows each step's state and duration, and the log filter shows
  one step's lines alone.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from marin_assets.execution.status import read_status
from tests.conftest import REEXECUTE, first_failure_description, launch_assets, materialized_in
from tests.dagster_bridge.run_steps import (
    FAMILY_STATUS_AFTER_BAD_FAILED,
    failing_family,
    independent_steps,
    interval_of,
)
from tests.ui import test_browser
from tests.ui.conftest import LOCATION, DagsterDev
from tests.ui.test_browser import body_text, open_page, screenshot

# The headless Chromium of the browser tests (skips with the reason when the browser stack is missing).
browser = test_browser.browser
ui = test_browser.ui

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

RUNS: dict[str, str] = {}  # run ids the browser test reads (tests of a module run in file order)

NAP_SECONDS = 6.0
FLAG = Path(f"/tmp/marin-ui-runs-fail-{__import__('os').getpid()}")
DAGSTER_WORKSPACE_YAML = f"""
load_from:
  - python_file:
      relative_path: {Path(__file__).with_name("run_location.py")}
      location_name: {LOCATION}
      working_directory: {Path(__file__).resolve().parents[2]}
"""
DAGSTER_ENV = {"MARIN_TEST_FAIL_FLAG": str(FLAG), "MARIN_TEST_NAP_SECONDS": str(NAP_SECONDS)}


def test_independent_steps_of_a_ui_run_run_together(dagster_dev: DagsterDev):
    steps = independent_steps(4, NAP_SECONDS)
    started = time.monotonic()
    run_id = launch_assets(dagster_dev, [["nap", f"s{i:02d}"] for i in range(4)])
    run = dagster_dev.wait_for_run(run_id)
    wall = time.monotonic() - started
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()
    RUNS["naps"] = run_id
    from marin_assets.execution import StepGraph

    graph = StepGraph(steps, str(dagster_dev.prefix))
    intervals = [interval_of(graph.resolved(s).output_path) for s in steps]
    assert max(s for s, _ in intervals) < min(e for _, e in intervals), intervals
    assert materialized_in(dagster_dev, run_id) == {f"nap/s{i:02d}" for i in range(4)}
    print(f"4 x {NAP_SECONDS} s steps: UI run {wall:.1f} s from launch to SUCCESS")


def test_a_failure_stops_only_descendants_then_reexecute_from_failure_runs_what_is_left(dagster_dev: DagsterDev):
    FLAG.write_text("fail")
    try:
        family = failing_family(str(FLAG), NAP_SECONDS)
        paths = [["family", name] for name in family]
        run_id = launch_assets(dagster_dev, paths)
        run = dagster_dev.wait_for_run(run_id)
        assert run["status"] == "FAILURE"
        RUNS["family"] = run_id
        assert materialized_in(dagster_dev, run_id) == {"family/root", "family/sibling"}
        from marin_assets.execution import StepGraph

        graph = StepGraph(list(family.values()), str(dagster_dev.prefix))
        statuses = {n: read_status(graph.resolved(s).output_path).status for n, s in family.items()}
        assert statuses == FAMILY_STATUS_AFTER_BAD_FAILED
        description = first_failure_description(dagster_dev, run_id)
        assert description.splitlines()[0].startswith("ValueError: planned failure of bad"), description
    finally:
        FLAG.unlink(missing_ok=True)
    again = dagster_dev.graphql(REEXECUTE, {"params": {"parentRunId": run_id, "strategy": "FROM_FAILURE"}})[
        "launchRunReexecution"
    ]
    assert again["__typename"] == "LaunchRunSuccess", again
    rerun_id = again["run"]["runId"]
    rerun = dagster_dev.wait_for_run(rerun_id)
    assert rerun["status"] == "SUCCESS", dagster_dev.log_tail()
    # Only what was left: the failed step and the two that did not run; root and sibling stay as they were.
    assert materialized_in(dagster_dev, rerun_id) == {"family/bad", "family/child", "family/grandchild"}


def test_run_page_shows_each_step_and_one_steps_logs_alone(ui, dagster_dev: DagsterDev, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    assert "naps" in RUNS and "family" in RUNS, "the GraphQL tests above launch the runs this page shows"
    text = open_page(ui, f"{dagster_dev.url}/runs/{RUNS['naps']}", "RUN_SUCCESS", "nap/s03: done in")
    for i in range(4):  # each step: when it started and how long it took
        assert f"nap/s{i:02d}: started" in text and re.search(rf"nap/s{i:02d}: done in \d+\.\ds", text), text[:3000]
    screenshot(ui, tmp_path, "naps_run")
    text = open_page(
        ui, f"{dagster_dev.url}/runs/{RUNS['family']}", "RUN_FAILURE", "family/child: not run", "family/bad: FAILED"
    )
    assert "family/sibling: done in" in text and "ValueError: planned failure of bad" in text
    assert "family/grandchild: not run, input family/bad failed (DEP_FAILED)" in text
    screenshot(ui, tmp_path, "family_run")
    # One step's logs alone: the log filter on its name.
    fields = [f for f in ui.find_elements(By.TAG_NAME, "input") if "ilter" in (f.get_attribute("placeholder") or "")]
    assert fields, "no log filter on the run page"
    fields[0].send_keys("family/sibling")
    fields[0].send_keys(Keys.ENTER)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = body_text(ui)
        if "family/sibling: done in" in text and "family/bad: FAILED" not in text:
            break
        time.sleep(0.5)
    screenshot(ui, tmp_path, "family_run_sibling_logs")
    assert "family/sibling: started" in text and "family/sibling: done in" in text, text[:3000]
    assert "family/bad: FAILED" not in text and "family/child: not run" not in text, text[:3000]
