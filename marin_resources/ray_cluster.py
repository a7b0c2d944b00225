"""One Ray per machine: connect to a running cluster or start an embedded local one.

No Dagster import here: the step engine uses these functions directly, and the Dagster
``RayResource`` (``marin_resources.ray_resource``) wraps them.

Sharing: several processes of one Dagster run (multiprocess executor), ``dagster dev`` and
``executor_main`` must not each start their own Ray -- the second ``ray.init(num_cpus=...)`` on a
machine attaches to the first cluster and fails. The first caller starts a head node with
``ray start``-like semantics (a detached local cluster whose address is recorded in
``<ray_temp_dir>/marin_ray_address``) and later callers connect to that address.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

ADDRESS_FILE = "marin_ray_address"


@dataclass(frozen=True)
class RayClusterConfig:
    """How to reach Ray.

    Attributes:
        address: ``ray://host:10001``, ``host:6379`` or ``auto``; None means ``$RAY_ADDRESS`` if
            set, else an embedded local cluster shared by every process of this machine.
        num_cpus: logical CPUs of the embedded cluster (None: max(8, cores) -- more logical CPUs
            than cores avoids the Levanter cache-builder deadlock on small machines).
        resources: extra custom resources of the embedded cluster (e.g. fake TPU labels in tests).
        namespace: Ray namespace for named actors.
        include_dashboard: the dashboard costs ~1 GB of memory, so it is off by default.
        temp_dir: Ray's temp dir for the embedded cluster (None: ``$MARIN_RAY_TMPDIR`` or
            ``/tmp/marin-ray-<uid>``).
        object_store_memory: bytes for the embedded object store (None: Ray's default).
        runtime_env: default runtime env of the driver.
    """

    address: str | None = None
    num_cpus: int | None = None
    resources: dict[str, float] = field(default_factory=dict)
    namespace: str = "marin"
    include_dashboard: bool = False
    temp_dir: str | None = None
    object_store_memory: int | None = None
    runtime_env: dict[str, Any] = field(default_factory=dict)


def default_temp_dir() -> str:
    """Where the embedded cluster keeps its sockets and logs (short: Unix socket paths are limited)."""
    return os.environ.get("MARIN_RAY_TMPDIR") or f"/tmp/marin-ray-{os.getuid()}"


def _embedded_num_cpus(config: RayClusterConfig) -> int:
    if config.num_cpus is not None:
        return config.num_cpus
    return max(8, os.cpu_count() or 1)


def _head_alive(address: str) -> bool:
    host, _, port = address.rpartition(":")
    import socket

    with contextlib.suppress(OSError), socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
        return True
    return False


def start_embedded_head(config: RayClusterConfig) -> str:
    """Start (or find) the machine-local head node and return its GCS address.

    Serialised by a file lock so that concurrent processes start exactly one head.
    """
    temp_dir = config.temp_dir or default_temp_dir()
    os.makedirs(temp_dir, exist_ok=True)
    address_file = os.path.join(temp_dir, ADDRESS_FILE)
    with open(os.path.join(temp_dir, "marin_ray.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.path.exists(address_file):
                with open(address_file) as handle:
                    address = handle.read().strip()
                if address and _head_alive(address):
                    return address
            import json
            import socket

            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            cmd = [
                os.path.join(os.path.dirname(sys.executable), "ray"),
                "start",
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                f"--num-cpus={_embedded_num_cpus(config)}",
                f"--temp-dir={temp_dir}",
                "--disable-usage-stats",
                f"--include-dashboard={'true' if config.include_dashboard else 'false'}",
            ]
            if config.resources:
                cmd.append(f"--resources={json.dumps(config.resources)}")
            if config.object_store_memory:
                cmd.append(f"--object-store-memory={config.object_store_memory}")
            env = dict(os.environ)
            env.pop("RAY_ADDRESS", None)
            logger.info("starting embedded Ray head: %s", " ".join(cmd))
            result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
            if result.returncode != 0:
                raise RuntimeError(f"`ray start --head` failed ({result.returncode}):\n{result.stderr[-3000:]}")
            address = f"127.0.0.1:{port}"
            with open(address_file, "w") as handle:
                handle.write(address)
            return address
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def stop_embedded_head(temp_dir: str | None = None) -> None:
    """Stop the machine-local head started by :func:`start_embedded_head` (tests, shutdown)."""
    temp_dir = temp_dir or default_temp_dir()
    address_file = os.path.join(temp_dir, ADDRESS_FILE)
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    subprocess.run([ray_bin, "stop", "--force"], capture_output=True, timeout=120, check=False)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address_file)


def resolve_address(config: RayClusterConfig) -> str:
    """The address this process should connect to (starting the embedded head if needed)."""
    if config.address:
        return config.address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    return start_embedded_head(config)


def ensure_ray(config: RayClusterConfig | None = None) -> dict[str, float]:
    """Connect this process to Ray (once) and return the cluster's resources."""
    import ray

    config = config or RayClusterConfig()
    if not ray.is_initialized():
        address = resolve_address(config)
        start = time.monotonic()
        ray.init(
            address=address,
            namespace=config.namespace,
            runtime_env=config.runtime_env or None,
            log_to_driver=True,
            ignore_reinit_error=True,
        )
        logger.info("connected to Ray at %s in %.1fs", address, time.monotonic() - start)
    return dict(ray.cluster_resources())
