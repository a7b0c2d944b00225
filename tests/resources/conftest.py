"""Fixtures of the resource tests: one real embedded Ray head (with a fake TPU) for the package.

The head lives in a short per-session temp dir (Unix socket paths are limited to ~100 bytes) and is
stopped at the end with ``stop_embedded_head``, which only kills this head's processes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from marin_resources.ray_config import RayClusterConfig
from marin_resources.ray_connect import ensure_ray
from marin_resources.ray_head import start_embedded_head, stop_embedded_head

FAKE_TPU = {"TPU": 4, "TPU-v4-8-head": 1}
HEAD_CPUS = 4


@pytest.fixture(scope="package")
def ray_tmpdir() -> Iterator[str]:
    """A short Ray temp dir for this test package, exported as ``MARIN_RAY_TMPDIR``."""
    path = tempfile.mkdtemp(prefix="mrr-", dir="/tmp")
    saved = {k: os.environ.get(k) for k in ("MARIN_RAY_TMPDIR", "RAY_ADDRESS")}
    os.environ["MARIN_RAY_TMPDIR"] = path
    os.environ.pop("RAY_ADDRESS", None)
    try:
        yield path
    finally:
        stop_embedded_head(path)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="package")
def ray_head(ray_tmpdir: str) -> str:
    """The shared embedded head with a fake TPU v4-8 host; this process is connected to it."""
    import ray

    config = RayClusterConfig(num_cpus=HEAD_CPUS, resources=dict(FAKE_TPU), temp_dir=ray_tmpdir)
    address = start_embedded_head(config)
    if ray.is_initialized():  # an earlier test package may have left a connection to another cluster
        ray.shutdown()
    resources = ensure_ray(config)
    assert resources.get("TPU") == 4 and resources.get("TPU-v4-8-head") == 1, resources
    return address
