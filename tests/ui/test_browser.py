"""The Dagster UI of this code location in a real (headless) Chromium, driven by selenium.

Needs Debian ``chromium`` + ``chromium-driver`` and ``selenium`` (``bash scripts/install_browser.sh``);
skips with the reason when one is missing. Every page check waits for rendered content (the UI is
a React app fed by GraphQL) and saves a screenshot under the test's tmp dir.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from marin_assets.execution import StepGraph
from marin_assets.experiments import hello_world
from tests.ui.conftest import DagsterDev, metadata_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1400,1000",
)
PAGE_TIMEOUT_S = 45.0


def _chromium_binary() -> str | None:
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _missing_browser_parts() -> list[str]:
    missing = []
    if importlib.util.find_spec("selenium") is None:
        missing.append("python package selenium")
    if _chromium_binary() is None:
        missing.append("chromium (/usr/bin/chromium)")
    if not os.access(CHROMEDRIVER, os.X_OK):
        missing.append(f"chromedriver ({CHROMEDRIVER})")
    return missing


def expected_hashes(prefix) -> dict[str, str]:
    graph = StepGraph(hello_world.build_steps(), str(prefix))
    return {node.name: node.hash for node in graph.topological()}


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[object]:
    """A headless Chromium (fresh profile) under chromedriver; skips when the browser stack is missing."""
    missing = _missing_browser_parts()
    if missing:
        pytest.skip(f"browser UI tests need {', '.join(missing)}; run `bash scripts/install_browser.sh`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = _chromium_binary()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium_profile')}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def ui(browser, dagster_dev: DagsterDev):
    """The browser on this module's ``dagster dev``, with Dagster's first-visit community pop-up dismissed."""
    browser.get(dagster_dev.url + "/server_info")
    # The pop-up is a modal overlay that swallows clicks; the UI remembers "Skip" under this key.
    browser.execute_script("window.localStorage.setItem('communityNux', JSON.stringify('1'));")
    return browser


@pytest.fixture(scope="module")
def first_run(dagster_dev: DagsterDev) -> dict:
    """One run of ``hello_world_job`` launched through GraphQL: computes both steps."""
    run = dagster_dev.wait_for_run(dagster_dev.launch_job("hello_world_job"))
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()
    return run


def body_text(driver) -> str:
    """The rendered page text (read again when React replaced the body between two calls)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(20):
        try:
            return driver.find_element(By.TAG_NAME, "body").text
        except StaleElementReferenceException:
            time.sleep(0.1)
    return driver.find_element(By.TAG_NAME, "body").text


def wait_for_text(driver, *needles: str, timeout: float = PAGE_TIMEOUT_S) -> str:
    """Wait until every needle shows in the rendered page text; returns that text."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            text = body_text(driver)
        except Exception:  # noqa: BLE001 - the DOM is being replaced while React renders
            text = ""
        if all(n in text for n in needles):
            return text
        time.sleep(0.3)
    missing = [n for n in needles if n not in text]
    pytest.fail(f"{driver.current_url}: {missing} not rendered within {timeout}s; page text:\n{text[:3000]}")


def open_page(driver, url: str, *needles: str) -> str:
    driver.get(url)
    return wait_for_text(driver, *needles)


def screenshot(driver, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"could not save {path}"
    assert path.stat().st_size > 10_000, "screenshot is suspiciously small (blank page?)"
    return path


def metadata_value(page_text: str, label: str) -> str:
    """Value of a metadata row (``label / timestamp / value`` lines) in the asset page's table."""
    match = re.search(rf"^{re.escape(label)}\n[^\n]*\n([^\n]+)$", page_text, flags=re.MULTILINE)
    assert match, f"metadata row {label!r} not on the page:\n{page_text[:3000]}"
    return match.group(1).strip()


def click_button(driver, label: str) -> None:
    """Click the first enabled button labelled ``label``, retrying while React re-renders it."""
    from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + PAGE_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            buttons = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == label]
            if buttons and buttons[0].is_enabled():
                buttons[0].click()
                return
        except (StaleElementReferenceException, ElementClickInterceptedException) as exc:
            last_error = exc
        time.sleep(0.3)
    pytest.fail(f"no clickable button {label!r} on {driver.current_url}: {last_error!r}")


def test_catalog_lists_hello_world_group(ui, dagster_dev: DagsterDev, first_run, tmp_path):
    text = open_page(
        ui, f"{dagster_dev.url}/assets?view=flat", "hello_world / numbers", "hello_world / stats", "Materialized"
    )
    assert "Seeded random integers" in text  # step descriptions become asset descriptions
    assert "Mean, median, min and max of the numbers" in text
    # Both assets show as materialized once their status has loaded.
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while text.count("Materialized") < 2:
        if time.monotonic() > deadline:
            pytest.fail(f"catalog does not show both assets materialized:\n{text[:3000]}")
        time.sleep(0.5)
        text = body_text(ui)
    screenshot(ui, tmp_path, "catalog")


def test_asset_page_shows_step_metadata_and_code_version(ui, dagster_dev: DagsterDev, first_run, tmp_path):
    hashes = expected_hashes(dagster_dev.prefix)
    # The definition (description, marin/version) renders after the materialization's metadata: wait for both.
    text = open_page(
        ui,
        f"{dagster_dev.url}/assets/hello_world/stats",
        "marin/cached",
        "marin/hash",
        "marin/version",
        "marin/browser",
        "hello_world_job",
        # The description renders after the rest of the definition (its markdown loads lazily).
        "function marin_assets.experiments.hello_world.compute_stats",
    )
    assert metadata_value(text, "marin/cached") == "false"
    assert metadata_value(text, "marin/action") == "ran"
    assert metadata_value(text, "marin/hash") == hashes["hello_world/stats"]
    # The description names the step and its function (markdown code spans render as plain text).
    assert "Step hello_world/stats, function marin_assets.experiments.hello_world.compute_stats" in text
    # The code version sits in the collapsed "Compute details" section of the definition.
    from selenium.webdriver.common.by import By

    if "Code version" not in body_text(ui):
        ui.find_element(By.XPATH, "//*[normalize-space(text())='Compute details']").click()
    text = wait_for_text(ui, "Code version")
    match = re.search(r"^Code version\n([^\n]+)$", text, flags=re.MULTILINE)
    assert match and match.group(1).strip() == hashes["hello_world/stats"], text[-2000:]
    screenshot(ui, tmp_path, "asset_stats")


def test_materialize_button_records_a_cached_materialization(ui, dagster_dev: DagsterDev, first_run, tmp_path):
    open_page(ui, f"{dagster_dev.url}/assets/hello_world/stats", "marin/cached")
    click_button(ui, "Materialize")
    toast = wait_for_text(ui, "Launched run")
    short_id = re.search(r"Launched run ([0-9a-f]{8})", toast)
    assert short_id, toast[:1000]
    runs = dagster_dev.graphql("{ runsOrError(limit: 5) { ... on Runs { results { runId } } } }")
    run_id = next(r["runId"] for r in runs["runsOrError"]["results"] if r["runId"].startswith(short_id.group(1)))
    assert run_id != first_run["runId"]
    run = dagster_dev.wait_for_run(run_id)
    assert run["status"] == "SUCCESS", dagster_dev.log_tail()

    # The UI's button materialized only the selected asset, and the step was already SUCCESS.
    latest = metadata_of(dagster_dev.materializations(["hello_world", "stats"], limit=1)[0])
    assert latest["marin/cached"] is True
    numbers_latest = dagster_dev.materializations(["hello_world", "numbers"], limit=1)[0]
    assert numbers_latest["runId"] == first_run["runId"]

    ui.refresh()
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while True:
        text = wait_for_text(ui, "marin/cached")
        if metadata_value(text, "marin/cached") == "true":
            break
        if time.monotonic() > deadline:
            pytest.fail(f"asset page still shows the old materialization:\n{text[:3000]}")
        time.sleep(1)
        ui.refresh()
    assert metadata_value(text, "marin/action") == "cached"
    screenshot(ui, tmp_path, "asset_stats_cached")


def test_run_page_shows_steps_and_materializations(ui, dagster_dev: DagsterDev, first_run, tmp_path):
    hashes = expected_hashes(dagster_dev.prefix)
    text = open_page(
        ui,
        f"{dagster_dev.url}/runs/{first_run['runId']}",
        "Success",
        "hello_world_job",
        "RUN_SUCCESS",
        "ASSET_MATERIALIZATION",
    )
    # One shared op per partition set materializes the selected steps of every group.
    assert "marin__steps" in text and "Succeeded (1)" in text
    assert "marin/cached false" in text
    assert f"marin/hash {hashes['hello_world/numbers']}" in text
    # Each step's own lines: when it started (and why), how long it took, where its output is.
    assert "hello_world/numbers: started" in text
    assert (
        re.search(
            rf"hello_world/numbers: done in \d+\.\ds, {re.escape(str(dagster_dev.prefix))}/hello_world/numbers-", text
        )
        is not None
    ), text[:3000]
    screenshot(ui, tmp_path, "run")
