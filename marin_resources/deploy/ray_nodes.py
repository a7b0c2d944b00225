"""The local topology's Ray: a head (Ray Client server, dashboard / Jobs API) and N worker nodes.

Part of ``scripts/local_deploy.sh`` (:mod:`marin_resources.deploy.local`). Every node is ``ray start``
with token authentication (the token file in ``RAY_AUTH_TOKEN_PATH``); the head has no CPUs, so every
step runs on a worker node. With several workers, Ray's scheduler spreads tasks over them
(``RAY_scheduler_spread_threshold=0``: the least-loaded node first, instead of filling one node to
half its CPUs before using the next), so the independent steps of a run and the shards of a
curation stage land on every worker (``marin/ran_on`` says which).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
from typing import Any

from marin_resources.deploy import services
from marin_resources.deploy.services import DeployError, DeployState

# Ray nodes (head, worker) started at most this often: see start_ray.
WORKER_START_ATTEMPTS = 5
# Ports every worker node needs of its own (the first worker's names are the historical ones).
_WORKER_PORTS = ("agent", "agent_grpc", "metrics")
HEAD_PORT_NAMES = ("ray_gcs", "ray_client", "ray_head_agent", "ray_head_agent_grpc", "ray_head_metrics")


def worker_port_names(index: int) -> dict[str, str]:
    """The port names of worker node ``index`` (0-based) in the topology's ports: ``ray_worker_agent``,
    ... for the first, ``ray_worker2_agent``, ... for the second, and so on."""
    prefix = "ray_worker" if index == 0 else f"ray_worker{index + 1}"
    return {f"ray_worker_{name}": f"{prefix}_{name}" for name in _WORKER_PORTS}


def ray_port_names(workers: int) -> tuple[str, ...]:
    """Every port name of a head with ``workers`` worker nodes."""
    return HEAD_PORT_NAMES + tuple(n for i in range(workers) for n in worker_port_names(i).values())


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def ray_node_env(env: dict[str, str], workers: int = 1) -> dict[str, str]:
    node_env = {k: v for k, v in env.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    # Workers start on demand: idle pre-started Python workers cost ~150 MB each.
    node_env.setdefault("RAY_prestart_worker_first_driver", "0")
    node_env.setdefault("RAY_num_workers_soft_limit", str(max(1, os.cpu_count() or 1)))
    # The Ray Client proxy gives each client's server process 30 s to come up: too short on a
    # busy small machine (clients then fail with "Starting Ray client server failed").
    node_env.setdefault("RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S", "120")
    # A raylet waits this long for its dashboard agent (a Python process) to report its port, then
    # aborts; on a loaded small machine the agent's start alone can take longer than the default.
    node_env.setdefault("RAY_agent_register_timeout_ms", "120000")
    if workers > 1:
        # Spread: a task goes to the least-loaded worker node instead of filling one node to half its
        # CPUs first (Ray's default hybrid policy), so a run's independent steps use every worker.
        node_env.setdefault("RAY_scheduler_spread_threshold", "0")
    return node_env


def ray_head_env(node_env: dict[str, str]) -> dict[str, str]:
    """The head's environment: its Ray Client proxy forks one server process per client.

    The proxy forks while its gRPC threads are busy; with gRPC's fork handlers on, the child can
    die before it execs (``epoll_wait ... Bad file descriptor``; ray-project/ray#63202), and the
    client then waits the whole channel timeout before it may retry. The proxy always execs right
    after forking, so the handlers are not needed there.
    """
    return {**node_env, "GRPC_ENABLE_FORK_SUPPORT": "false"}


def _wait_dashboard(url: str, log: str, timeout_s: float, pid: int) -> None:
    """Wait until the dashboard answers HTTP (401 counts: it is up and wants the token)."""

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            pass
        if not services.group_processes(pid):
            raise DeployError(f"Ray head exited; see {log}:\n{services._tail(log)}")
        time.sleep(0.5)
    raise DeployError(f"the Ray dashboard did not answer {url} within {timeout_s:.0f}s; see {log}")


def start_ray(
    state: DeployState,
    env: dict[str, str],
    log_dir: str,
    *,
    workers: int = 1,
    worker_cpus: int = 8,
    worker_object_store_mb: int = 1024,
    worker_gpus: int = 0,
    worker_resources: dict[str, float] | None = None,
    step: Any = None,
) -> list[dict[str, Any]]:
    """The topology's Ray: head (Ray Client server, dashboard / Jobs API) and ``workers`` worker
    nodes, with the token of ``RAY_AUTH_TOKEN_PATH`` in ``env``; recorded in ``state``. Returns the
    alive nodes. ``state.ports`` holds :func:`ray_port_names` of ``workers``."""
    if workers < 1:
        raise DeployError(f"--ray_workers must be at least 1 (the head runs no steps), got {workers}")
    ports = state.ports
    node_env = ray_node_env(env, workers)
    ray_tmp = os.path.join("/tmp", f"marin-deploy-{os.getuid()}-{ports['ray_gcs']}")  # short: socket paths
    state.ray_temp_dir = ray_tmp
    head = _start_head(state, node_env, ray_tmp, log_dir, step)
    nodes: list[dict[str, Any]] = []
    for index in range(workers):
        worker_ports = {**ports, **{k: ports[v] for k, v in worker_port_names(index).items()}}
        command = services.ray_worker_command(
            _bin("ray"),
            ray_tmp,
            worker_ports,
            worker_cpus,
            worker_object_store_mb * 1024**2,
            num_gpus=worker_gpus,
            resources=worker_resources,
        )
        name = "ray-worker" if index == 0 else f"ray-worker-{index + 1}"
        nodes = _start_worker(state, name, command, node_env, log_dir, 2 + index, step)
    _wait_dashboard(f"http://127.0.0.1:{ports['ray_dashboard']}/api/version", head.log, 120, head.pid)
    state.ray_nodes = nodes
    state.save()
    return nodes


def _start_head(
    state: DeployState, node_env: dict[str, str], ray_tmp: str, log_dir: str, step: Any
) -> services.Service:
    ports = state.ports
    for attempt in range(1, WORKER_START_ATTEMPTS + 1):
        head = services.start_service(
            "ray-head",
            services.ray_head_command(_bin("ray"), ray_tmp, ports, 256 * 1024**2),
            ray_head_env(node_env),
            log_dir,
        )
        head.port = ports["ray_gcs"]
        state.services.append(head)
        state.save()
        try:
            services.wait_for_port(ports["ray_gcs"], "Ray head", head.log, 120, head.pid)
            services.wait_for_port(ports["ray_client"], "Ray Client server", head.log, 120, head.pid)
            return head
        except DeployError:
            # `ray start --head` also gives its raylet 30 s (hard-coded) to register with the GCS;
            # on an overloaded machine it gives up and exits. Another attempt usually succeeds.
            if attempt == WORKER_START_ATTEMPTS:
                raise
            services.stop_group(head.pid)  # its GCS server and raylet may still run: free the ports
            state.services.remove(head)
            if step:
                step(f"ray head did not come up (attempt {attempt}); starting it again")
    raise AssertionError("unreachable")


def _start_worker(
    state: DeployState,
    name: str,
    command: list[str],
    node_env: dict[str, str],
    log_dir: str,
    nodes_expected: int,
    step: Any,
) -> list[dict[str, Any]]:
    """Start one worker node and wait until the cluster has ``nodes_expected`` alive nodes."""
    for attempt in range(1, WORKER_START_ATTEMPTS + 1):
        worker = services.start_service(name, command, node_env, log_dir)
        state.services.append(worker)
        state.save()
        try:
            return services.wait_for_ray_nodes(
                f"127.0.0.1:{state.ports['ray_gcs']}",
                nodes_expected,
                node_env,
                180,
                worker.log,
                sys.executable,
                pid=worker.pid,
            )
        except DeployError:
            # `ray start` gives a node 30 s (hard-coded) to register; on an overloaded machine
            # it gives up. Another attempt usually succeeds.
            if attempt == WORKER_START_ATTEMPTS or services.group_processes(worker.pid):
                raise
            state.services.remove(worker)
            if step:
                step(f"{name} did not register (attempt {attempt}); starting it again")
    raise AssertionError("unreachable")
