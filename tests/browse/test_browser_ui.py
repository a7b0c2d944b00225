"""The data browser in headless Chromium on real curation outputs, plus refusals and memory."""

from __future__ import annotations

import gzip
import json
import os
import random
import time

import psutil
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

from tests.browse.conftest import start_browser, stop_browser

pytestmark = pytest.mark.slow


def _click(driver, locator: str, by: str = By.ID) -> None:
    """Click a control that loads a new page, and wait until the old page is gone.

    Every control here navigates; reading elements right after the click could
    otherwise find the previous page's rows, which go stale under the reader.
    """
    old_page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(by, locator).click()
    WebDriverWait(driver, 30).until(staleness_of(old_page))


def test_consolidated_docs_page_filter_and_duplicate_reason(browser, browse_server, curated):
    driver = browser
    drop = "drop-001"
    consolidated = curated.path("consolidated", drop)
    rel = os.path.relpath(consolidated, curated.prefix)
    driver.get(browse_server.url + "/")
    _click(driver, "curation-", By.PARTIAL_LINK_TEXT)
    _click(driver, f"//a[@href='/browse/{rel}']", By.XPATH)
    assert "SUCCESS" in driver.find_element(By.ID, "output").text
    _click(driver, "docs/", By.LINK_TEXT)
    _click(driver, "shard-00000", By.PARTIAL_LINK_TEXT)
    first_ids = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#records tr td:nth-child(2) a")]
    assert len(first_ids) == 20
    _click(driver, "next-page")
    second_ids = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#records tr td:nth-child(2) a")]
    assert second_ids and not set(second_ids) & set(first_ids)
    assert "records 20–" in driver.find_element(By.ID, "page-info").text

    # Documents the consolidate step removed: its input shard, filtered.
    _click(driver, "removed-link")
    reasons = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#records .reason")]
    assert reasons and all(r for r in reasons)
    planted = {d["id"]: d["of"] for d in curated.truth(drop)["exact_dups"]}
    box = driver.find_element(By.ID, "filter-input")
    box.clear()
    box.send_keys("removed = true and reason ~ duplicate")
    _click(driver, "filter-apply")
    rows = driver.find_elements(By.CSS_SELECTOR, "#records tr td:nth-child(2) a")
    shown = [r.text for r in rows]
    hits = [i for i in shown if i in planted]
    while not hits and driver.find_elements(By.ID, "next-page"):
        _click(driver, "next-page")
        shown = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#records tr td:nth-child(2) a")]
        hits = [i for i in shown if i in planted]
    assert hits, "no planted exact duplicate among the removed documents"
    _click(driver, hits[0], By.LINK_TEXT)
    reason = driver.find_element(By.ID, "removal-reason").text
    assert "removed" in reason and f"duplicate of {planted[hits[0]]}" in reason
    assert driver.find_element(By.ID, "doc-text").text.strip()
    assert driver.find_elements(By.ID, "before-text")  # the HTML this text came from


def test_paths_outside_the_prefix_are_refused(browser, browse_server, curated, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret")
    link = os.path.join(curated.prefix, "escape")
    if not os.path.lexists(link):
        os.symlink(tmp_path, link)
    for path in ("/browse/../../etc/passwd", "/browse/%2e%2e/%2e%2e/etc/passwd", "/browse/escape/secret.txt",
                 "/browse//etc/passwd", "/browse/gs:/other-bucket/x", "/doc/escape/secret.txt?id=x"):  # fmt: skip
        status, body = browse_server.get(path)
        assert status in (403, 404), path
        assert "top secret" not in body and "root:" not in body
    assert browse_server.get("/browse/escape/secret.txt")[0] == 403
    browser.get(browse_server.url + "/browse/escape/secret.txt")
    assert "403" in browser.title and "top secret" not in browser.page_source
    status, _ = browse_server.get("/browse/landing")
    assert status == 200


def _write_big_shard(path, target_bytes: int) -> int:
    """A gzip jsonl shard of about ``target_bytes`` compressed (random words compress ~3x)."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    count = 0
    with gzip.open(path, "wt", compresslevel=1) as handle:
        while os.path.getsize(path) < target_bytes:
            for _ in range(500):
                text = " ".join(rng.choices(words, k=600))
                handle.write(json.dumps({"id": f"doc-{count:07d}", "text": text}) + "\n")
                count += 1
            handle.flush()
    return count


def test_a_50_mb_shard_pages_in_bounded_memory(tmp_path):
    prefix = tmp_path / "prefix"
    (prefix / "big" / "docs").mkdir(parents=True)
    shard = prefix / "big" / "docs" / "shard-00000.jsonl.gz"
    count = _write_big_shard(shard, 50 << 20)
    server = start_browser(str(prefix))
    try:
        process = psutil.Process(server.process.pid)
        status, _ = server.get("/browse/big/docs/shard-00000.jsonl.gz?n=50")
        assert status == 200
        baseline = process.memory_info().rss
        peak = baseline
        start = 0
        began = time.monotonic()
        for _ in range(40):  # forward paging, then a deep jump and a filtered scan
            status, body = server.get(f"/browse/big/docs/shard-00000.jsonl.gz?n=50&start={start}")
            assert status == 200 and f"doc-{start:07d}" in body
            start += 50
            peak = max(peak, process.memory_info().rss)
        deep = count - 30
        status, body = server.get(f"/browse/big/docs/shard-00000.jsonl.gz?n=20&start={deep}")
        assert status == 200 and f"doc-{deep:07d}" in body
        peak = max(peak, process.memory_info().rss)
        status, body = server.get("/browse/big/docs/shard-00000.jsonl.gz?n=20&filter=chars+%3E+1000000")
        assert status == 200
        peak = max(peak, process.memory_info().rss)
        growth = peak - baseline
        print(f"50 MB shard ({count} docs): RSS {baseline / 2**20:.0f} MiB -> peak {peak / 2**20:.0f} MiB, "
              f"41 pages in {time.monotonic() - began:.1f}s")  # fmt: skip
        assert growth < 40 << 20, f"RSS grew by {growth / 2**20:.0f} MiB while paging a 50 MB shard"
    finally:
        stop_browser(server)
