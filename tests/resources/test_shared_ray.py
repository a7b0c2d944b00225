"""Several processes of one machine share one embedded Ray, and stopping it is targeted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import psutil
import pytest

from marin_resources.ray_cluster import ADDRESS_FILE, stop_embedded_head

pytestmark = pytest.mark.ray

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import ray
    from marin_resources.ray_cluster import RayClusterConfig, ensure_ray
    ensure_ray(RayClusterConfig(num_cpus=2))
    ctx = ray.get_runtime_context()
    pid = ray.get(ray.remote(lambda: os.getpid()).remote())
    print(json.dumps({"gcs": ctx.gcs_address, "node": ctx.get_node_id(), "worker_pid": pid}))
    """
)


def _raylets(temp_dir: str) -> list[int]:
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "raylet" in cmd and temp_dir + "/" in cmd:
            out.append(proc.info["pid"])
    return out


@pytest.mark.timeout(180)
def test_two_processes_share_one_embedded_ray_and_stop_is_targeted(ray_head, ray_tmpdir):
    # A fresh temp dir: the two children race to start the head (the package's head stays up).
    temp_dir = tempfile.mkdtemp(prefix="mrs-", dir="/tmp")
    env = {**os.environ, "MARIN_RAY_TMPDIR": temp_dir}
    env.pop("RAY_ADDRESS", None)
    try:
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        results = []
        for child in children:
            out, err = child.communicate(timeout=150)
            assert child.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        first, second = results
        assert first["gcs"] == second["gcs"]
        assert first["node"] == second["node"]
        assert len(_raylets(temp_dir)) == 1
        with open(os.path.join(temp_dir, ADDRESS_FILE)) as handle:
            assert handle.read().strip().rpartition(":")[2] == first["gcs"].rpartition(":")[2]
        # Not the package's head: a different cluster.
        assert len(_raylets(ray_tmpdir)) == 1
        assert first["gcs"].rpartition(":")[2] != ray_head.rpartition(":")[2]

        stop_embedded_head(temp_dir)
        assert _raylets(temp_dir) == []
        assert not os.path.exists(os.path.join(temp_dir, ADDRESS_FILE))
        # Only that head was stopped: the package's head still runs tasks.
        assert len(_raylets(ray_tmpdir)) == 1
        import ray

        assert ray.get(ray.remote(lambda: 1).remote(), timeout=60) == 1
    finally:
        stop_embedded_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
