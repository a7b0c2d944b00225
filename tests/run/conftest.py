"""A real two-node Ray cluster for the launcher tests: head (with the dashboard / Jobs API) + worker.

Started with ``ray start`` in a private temp dir and a private ``HOME`` (the auth token lives in
``~/.ray/auth_token``) with token authentication on (``RAY_AUTH_MODE=token``), every port free, and
stopped at the end by killing exactly the processes of that temp dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_resources.ray_head import ADDRESS_FILE, _free_port, stop_embedded_head

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


@dataclass
class RayCluster:
    """A running local cluster: GCS address, Jobs API URL, and the environment clients need."""

    gcs_address: str
    dashboard_url: str
    env: dict[str, str]
    home: str
    temp_dir: str

    def ray_run(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        """``python -m marin_assets.run.ray_run --address <dashboard> <args>`` from the repo root."""
        result = subprocess.run(
            [sys.executable, "-m", "marin_assets.run.ray_run", "--address", self.dashboard_url, *args],
            cwd=REPO_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"ray_run {args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result


def _node_ports() -> list[str]:
    return [
        f"--node-manager-port={_free_port()}",
        f"--object-manager-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--dashboard-agent-grpc-port={_free_port()}",
        f"--metrics-export-port={_free_port()}",
        f"--runtime-env-agent-port={_free_port()}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--object-store-memory=100000000",
        "--disable-usage-stats",
    ]


def _wait_http(url: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except urllib.error.HTTPError as exc:  # 401: up, and asking for the token
            return exc.code
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    temp_dir = tempfile.mkdtemp(prefix="mrr-", dir="/tmp")
    home = tempfile.mkdtemp(prefix="mrr-home-", dir="/tmp")
    port, dashboard_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        HOME=home,
        PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        RAY_prestart_worker_first_driver="0",
        MARIN_RAY_TMPDIR=temp_dir,
    )
    head = [
        RAY, "start", "--head", f"--port={port}", f"--temp-dir={temp_dir}", "--include-dashboard=true",
        "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}", f"--ray-client-server-port={_free_port()}",
        *_node_ports(),
    ]  # fmt: skip
    # Token authentication on, as Ray 2.60 clusters run it: clients must present ~/.ray/auth_token.
    node_env = {**env, "RAY_AUTH_MODE": "token"}
    try:
        subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=60)
        subprocess.run(head, env=node_env, check=True, capture_output=True, text=True, timeout=180)
        gcs = f"127.0.0.1:{port}"
        Path(temp_dir, ADDRESS_FILE).write_text(gcs)  # lets stop_embedded_head find every process
        worker = [RAY, "start", f"--address={gcs}", *_node_ports()]
        subprocess.run(worker, env=node_env, check=True, capture_output=True, text=True, timeout=180)
        url = f"http://127.0.0.1:{dashboard_port}"
        _wait_http(f"{url}/api/version", 120)
        yield RayCluster(gcs_address=gcs, dashboard_url=url, env=env, home=home, temp_dir=temp_dir)
    except subprocess.CalledProcessError as exc:
        raise AssertionError(f"ray start failed: {exc.stderr[-3000:]}") from exc
    finally:
        stop_embedded_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
