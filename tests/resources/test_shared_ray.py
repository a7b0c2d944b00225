"""Several processes of one machine share one embedded Ray, stopping it is targeted, and it is closed:
loopback only, token auth, one token per head whatever ``$RAY_AUTH_TOKEN`` a run has."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap

import psutil
import pytest

from marin_resources.ray_config import RayClusterConfig
from marin_resources.ray_head import ADDRESS_FILE, TOKEN_FILE, _head_processes, start_embedded_head, stop_embedded_head

pytestmark = pytest.mark.ray

_CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import ray
    from marin_resources.ray_config import RayClusterConfig
    from marin_resources.ray_connect import ensure_ray
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


LOOPBACK = ("127.", "::1", "::ffff:127.")
# Someone on the network: plain Ray, the head's own token even, and a short GCS timeout (Ray would
# otherwise retry for minutes before it gives up).
_OUTSIDER = textwrap.dedent(
    """
    import sys, ray
    ray.init(address=sys.argv[1])
    print("CONNECTED", ray.get(ray.remote(lambda: 1).remote(), timeout=30), flush=True)
    """
)


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback (e.g. eth0's)."""
    return [
        addr.address
        for addrs in psutil.net_if_addrs().values()
        for addr in addrs
        if addr.family == socket.AF_INET and not addr.address.startswith("127.")
    ]


def _listening(temp_dir: str, address: str) -> set[tuple[str, int]]:
    found = set()
    for proc in _head_processes(temp_dir, address):
        with contextlib.suppress(psutil.Error):
            for conn in proc.net_connections(kind="inet"):
                if conn.status == psutil.CONN_LISTEN:
                    found.add((conn.laddr.ip, conn.laddr.port))
    return found


def _outsider(address: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {**env, "RAY_gcs_rpc_server_connect_timeout_s": "2", "RAY_gcs_rpc_server_reconnect_timeout_s": "5"}
    try:
        return subprocess.run(
            [sys.executable, "-c", _OUTSIDER, address], env=env, capture_output=True, text=True, timeout=90
        )
    except subprocess.TimeoutExpired as exc:  # still trying after 90 s: it did not get in either
        return subprocess.CompletedProcess(exc.cmd, -9, exc.stdout or "", exc.stderr or "")


@pytest.mark.timeout(300)
def test_embedded_head_listens_on_loopback_only_and_refuses_other_addresses(ray_head, ray_tmpdir):
    import ray

    ray.get(ray.remote(lambda: 0).remote(), timeout=60)  # a worker is up: its port counts too
    ports = _listening(ray_tmpdir, ray_head)
    assert len(ports) >= 5, ports  # GCS, raylet, object manager, agents, the worker
    assert [p for p in ports if not p[0].startswith(LOOPBACK)] == []

    token = os.path.join(ray_tmpdir, TOKEN_FILE)
    assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
    others = _other_addresses()
    if not others:
        pytest.skip("this machine has no address but loopback: nobody else can reach it")
    for ip in others:
        for _, port in ports:
            with pytest.raises(OSError), socket.create_connection((ip, port), timeout=5):
                pass
    # A Ray client on another address, even one holding the token, does not get in.
    gcs_port = ray_head.rpartition(":")[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    with_token = {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token}
    result = _outsider(f"{others[0]}:{gcs_port}", with_token)
    assert result.returncode != 0 and "CONNECTED" not in result.stdout, result.stdout + result.stderr[-2000:]


@pytest.mark.timeout(300)
def test_loopback_client_without_the_token_is_refused(ray_head, ray_tmpdir):
    gcs = ray_head
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # stay on 127.0.0.1, as the project's drivers do
    for auth in ({"RAY_AUTH_MODE": "disabled"}, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}):
        result = _outsider(gcs, {**env, **auth})
        assert result.returncode != 0 and "CONNECTED" not in result.stdout, (auth, result.stdout)


_RUN = textwrap.dedent(
    """
    import json, os
    import ray
    from marin_resources.ray_config import RayClusterConfig
    from marin_resources.ray_connect import ensure_ray
    ensure_ray(RayClusterConfig(num_cpus=2))
    env = ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}).remote())
    print(json.dumps({"gcs": ray.get_runtime_context().gcs_address, "task_env": env}))
    """
)


@pytest.mark.timeout(400)
def test_a_run_without_ray_auth_token_reuses_a_head_started_with_one(ray_head):
    temp_dir = tempfile.mkdtemp(prefix="mrt-", dir="/tmp")
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base["MARIN_RAY_TMPDIR"] = temp_dir
    try:
        gcs = []
        for extra in ({"RAY_AUTH_TOKEN": "first-runs-own-token-1234"}, {}, {"RAY_AUTH_TOKEN": "another-one-5678"}):
            child = subprocess.run(
                [sys.executable, "-c", _RUN], env={**base, **extra}, capture_output=True, text=True, timeout=180
            )
            assert child.returncode == 0, (extra, child.stderr[-3000:])
            result = json.loads(child.stdout.strip().splitlines()[-1])
            assert result["task_env"] == {"RAY_AUTH_TOKEN": None, "RAY_AUTH_MODE": "token"}
            gcs.append(result["gcs"])
        assert len(set(gcs)) == 1 and len(_raylets(temp_dir)) == 1  # one head, reused by all three runs
        with open(os.path.join(temp_dir, TOKEN_FILE)) as handle:
            token = handle.read().strip()
        assert len(token) == 64 and token not in {"first-runs-own-token-1234", "another-one-5678"}
        assert stat.S_IMODE(os.stat(os.path.join(temp_dir, TOKEN_FILE)).st_mode) == 0o600
        # A live head without a token beside it (started before heads were closed) is replaced.
        os.unlink(os.path.join(temp_dir, TOKEN_FILE))
        replaced = start_embedded_head(RayClusterConfig(num_cpus=2, temp_dir=temp_dir))
        assert replaced.rpartition(":")[2] != gcs[0].rpartition(":")[2] and len(_raylets(temp_dir)) == 1
        assert os.path.getsize(os.path.join(temp_dir, TOKEN_FILE)) == 64
    finally:
        stop_embedded_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _step(config: dict) -> dict:
    return {"value": config["value"] * 2}


@pytest.mark.timeout(180)
def test_a_step_on_ray_records_its_job_task_and_worker_log_and_links_them(ray_head, ray_tmpdir):
    import ray

    from marin_assets.dagster_bridge.metadata import to_dagster_metadata
    from marin_assets.execution.metadata import TYPE_KEY
    from marin_resources.ray_jobs import _METADATA_TYPE_KEY, PLACEMENT_KEY, ray_links, recording_placement

    assert _METADATA_TYPE_KEY == TYPE_KEY  # the marker the Dagster bridge reads
    result = ray.get(ray.remote(recording_placement(_step)).remote({"value": 21}), timeout=120)
    placement = result[PLACEMENT_KEY]
    assert result["value"] == 42
    context = ray.get_runtime_context()
    assert placement["ray_job_id"] == context.get_job_id() and placement["ray_node_id"] == context.get_node_id()
    assert placement["ray_task_id"] and placement["ray_worker_id"] != context.get_worker_id()
    # The worker's log file the link opens exists in the node's Ray log folder.
    logs = os.path.join(ray_tmpdir, "session_latest", "logs")
    assert os.path.isfile(os.path.join(logs, placement["ray_worker_log"])), sorted(os.listdir(logs))[-10:]

    links = ray_links(placement, "http://127.0.0.1:8265/")
    job, task = placement["ray_job_id"], placement["ray_task_id"]
    shown = to_dagster_metadata(links)
    assert shown["marin/ray_task"].url == f"http://127.0.0.1:8265/#/jobs/{job}/tasks/{task}"
    assert set(shown) == {"marin/ray_task"}
    assert ray_links(placement, "") == {}
