"""Fixtures of the browser tests: curation outputs of two sample drops, and a browser server process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_assets.execution.executor_main import write_experiment_record
from tests.curation.conftest import DROPS, SMALL, SOURCE, PipelineRun, run_pipeline
from tests.ui.conftest import free_port
from tests.ui.test_browser import browser  # noqa: F401 - the headless Chromium fixture, reused

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class BrowserServer:
    """A ``python -m marin_assets.browse`` process."""

    url: str
    process: subprocess.Popen

    def get(self, path: str, host_header: str | None = None) -> tuple[int, str]:
        """Status and body of ``GET path`` (the path is sent as is, not normalised; ``host_header``
        replaces the ``Host`` header http.client would send)."""
        import http.client

        host, port = self.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        if host_header is None:
            connection.request("GET", path)
        else:
            connection.putrequest("GET", path, skip_host=True)
            connection.putheader("Host", host_header)
            connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")


def start_browser(prefix: str, *extra_args: str) -> BrowserServer:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "marin_assets.browse", "--prefix", prefix, "--port", str(port), *extra_args],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5):
                return BrowserServer(url, process)
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("the browser did not start") from None
            time.sleep(0.3)


def stop_browser(server: BrowserServer) -> None:
    os.killpg(server.process.pid, signal.SIGTERM)
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=10)


@pytest.fixture(scope="session")
def curated(tmp_path_factory) -> PipelineRun:
    """The curation pipeline run over two sample drops, with its experiment record."""
    from marin_assets.experiments.sample_data import write_drop

    prefix = str(tmp_path_factory.mktemp("browse") / "prefix")
    for drop in DROPS[:2]:
        write_drop(prefix, drop, SMALL, SOURCE)
    run = run_pipeline(prefix, DROPS[:2])
    write_experiment_record(
        run.graph, "curation (browser test)", str(REPO_ROOT / "marin_assets/experiments/curation.py"), "test"
    )
    return run


@pytest.fixture(scope="module")
def browse_server(curated) -> Iterator[BrowserServer]:
    server = start_browser(curated.prefix)
    try:
        yield server
    finally:
        stop_browser(server)
