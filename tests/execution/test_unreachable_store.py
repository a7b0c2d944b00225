"""An object store that cannot be reached fails the run in seconds, with one line naming the store's
host, this runner's host and the steps -- not a minute of client retries and pages of tracebacks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from marin_assets.execution.reachability import StoreUnreachableError, check_store

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(
    "endpoint, why",
    [
        ("http://no-such-store.invalid:4443", "does not resolve"),  # .invalid never resolves (RFC 2606)
        ("http://127.0.0.1:{port}", "Connection refused"),  # nothing listens there
    ],
)
def test_an_unreachable_store_fails_the_run_in_one_line(endpoint, why, tmp_path):
    endpoint = endpoint.format(port=_free_port())
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "STORAGE_EMULATOR_HOST": endpoint,
        "MARIN_HOST_ID": "runner-host-7",
        "COUNTER_DIR": str(tmp_path),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.execution.sample_steps",
            "diamond",
            "--prefix",
            "gs://bucket/marin",
            "--no_record",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=40,  # gcsfs alone retries for 50-90 s before failing
    )
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    (line,) = lines
    host = endpoint.split("//")[1].split(":")[0]
    assert host in line and "runner-host-7" in line and why in line and "test/a" in line, line
    assert "Traceback" not in proc.stderr


def test_a_reachable_store_passes_the_check(gcs_prefix):
    check_store(gcs_prefix, ["step"])  # the session's GCS server listens: no error


def test_check_store_names_the_steps(monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://no-such-store.invalid:4443")
    with pytest.raises(StoreUnreachableError, match=r"step a, b, c \(\+2 more\) not started"):
        check_store("gs://bucket/x", ["a", "b", "c", "d", "e"])
