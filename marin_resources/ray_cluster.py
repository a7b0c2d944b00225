"""One Ray per machine: connect to a running cluster or start an embedded local one.

No Dagster import here: the step engine uses these functions directly, and the Dagster
``RayResource`` (``marin_resources.dagster_resources``) wraps them.

Sharing: several processes of one Dagster run (multiprocess executor), ``dagster dev`` and
``executor_main`` must not each start their own Ray -- the second ``ray.init(num_cpus=...)`` on a
machine attaches to the first cluster and fails. The first caller starts a head node with
``ray start``-like semantics (a detached local cluster whose address is recorded in
``<ray_temp_dir>/marin_ray_address``) and later callers connect to that address.

Closed by default: the embedded head listens on loopback only and runs with token authentication;
its token is generated once into ``<ray_temp_dir>/marin_ray_auth_token`` (mode 0600) and every driver that connects through :func:`ensure_ray` presents it, whatever
``$RAY_AUTH_TOKEN`` the caller has (that variable names an external cluster's token).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

ADDRESS_FILE = "marin_ray_address"
TOKEN_FILE = "marin_ray_auth_token"
# Ray 2.60 turns a loopback --node-ip-address (and a driver's 127.0.0.1 address) into the machine's
# routable IP unless it believes it runs on a laptop (services.resolve_ip_for_localhost); with the
# node IP left at 127.0.0.1 the GCS server, raylet, object manager, agents, client server and every
# worker bind 127.0.0.1 instead of 0.0.0.0. It also refuses extra nodes: right for this head.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


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


def embedded_token_path(temp_dir: str | None = None) -> str:
    """The embedded head's auth token file (``<temp_dir>/marin_ray_auth_token``)."""
    return os.path.join(os.path.abspath(temp_dir or default_temp_dir()), TOKEN_FILE)


def _own_dir(path: str) -> None:
    """Create ``path`` or check that an existing one is a directory of this user.

    ``/tmp/marin-ray-<uid>`` is a predictable name: a directory (or a link to one) planted there by
    another user must not receive this user's head and token. (Ray makes the dir world-writable
    itself; the token file is what is private.)
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    if not os.path.isdir(path) or os.stat(path).st_uid != os.getuid():
        raise RuntimeError(f"Ray temp dir {path} is not a directory owned by this user; choose $MARIN_RAY_TMPDIR")


def _read_or_create_token(path: str) -> None:
    """Write a fresh 256-bit token to ``path`` (mode 0600) unless it already holds one."""
    with contextlib.suppress(FileNotFoundError), open(path) as handle:
        if handle.read().strip():
            return
    import secrets

    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32))
    os.replace(tmp, path)


def _embedded_num_cpus(config: RayClusterConfig) -> int:
    if config.num_cpus is not None:
        return config.num_cpus
    return max(8, os.cpu_count() or 1)


def _free_port() -> int:
    """A currently free TCP port (tiny race window until Ray binds it; acceptable locally)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _head_alive(address: str) -> bool:
    host, _, port = address.rpartition(":")
    import socket

    with contextlib.suppress(OSError), socket.create_connection((host or "127.0.0.1", int(port)), timeout=1.0):
        return True
    return False


def start_embedded_head(config: RayClusterConfig) -> str:
    """Start (or find) the machine-local head node and return its GCS address.

    Serialised by a file lock so that concurrent processes start exactly one head. The head binds
    127.0.0.1 only and requires the token of :func:`embedded_token_path` (created here once).
    """
    temp_dir = os.path.abspath(config.temp_dir or default_temp_dir())
    _own_dir(temp_dir)
    address_file = os.path.join(temp_dir, ADDRESS_FILE)
    token_path = embedded_token_path(temp_dir)
    with open(os.path.join(temp_dir, "marin_ray.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.path.exists(address_file):
                with open(address_file) as handle:
                    address = handle.read().strip()
                if address and _head_alive(address):
                    if os.path.exists(token_path):
                        return address
                    # A head from before heads were closed (no token beside it): it may listen on
                    # every interface without authentication, so it is replaced.
                    logger.warning("replacing the embedded Ray head at %s: it has no auth token", address)
                    stop_embedded_head(temp_dir)
            _read_or_create_token(token_path)
            import json

            port = _free_port()
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
                "--dashboard-host=127.0.0.1",
                # Ray's fixed default ports (client server 10001, dashboard 8265, agent 52365) clash
                # when two embedded heads with different temp dirs run on one machine (parallel
                # test sessions); a dashboard agent that cannot bind takes its raylet down with it.
                f"--ray-client-server-port={_free_port()}",
                f"--dashboard-port={_free_port()}",
                f"--dashboard-agent-listen-port={_free_port()}",
                f"--dashboard-agent-grpc-port={_free_port()}",
                f"--metrics-export-port={_free_port()}",
            ]
            if config.resources:
                cmd.append(f"--resources={json.dumps(config.resources)}")
            if config.object_store_memory:
                cmd.append(f"--object-store-memory={config.object_store_memory}")
            env = head_environment(token_path=token_path)
            # The embedded head advertises more logical CPUs than cores (Levanter's cache builder
            # deadlocks otherwise); without these, Ray would keep that many idle Python workers
            # (~150 MB each) alive and pre-start them for the first driver. Workers start on demand.
            env.setdefault("RAY_prestart_worker_first_driver", "0")
            env.setdefault("RAY_num_workers_soft_limit", str(max(1, os.cpu_count() or 1)))
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


# What the embedded head -- and so every Ray worker it starts, for every later run on this machine --
# inherits: what a process needs to run Python, and Ray's own settings. Never the caller's
# credentials: each driver passes its steps' (non-secret) settings in its job runtime_env, and a
# step that needs a secret gets it as a resolved config value (``execution.secrets``).
HEAD_ENV_VARS = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "LD_LIBRARY_PATH",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
)


def configure_token_auth(
    environ: dict[str, str] | os._Environ[str] | None = None, token_path: str | None = None
) -> bool:
    """Make Ray's auth mode explicit in ``environ`` (default ``os.environ``); True when it changed it.

    With ``token_path`` (the embedded head, its drivers): ``RAY_AUTH_MODE=token`` and
    ``RAY_AUTH_TOKEN_PATH=token_path``, and ``RAY_AUTH_TOKEN`` is dropped -- Ray prefers that
    variable to the file, and a caller's value names some external cluster's token (a head that
    took it as its own locked out every later run without it). Without ``token_path`` (an external
    cluster): ``token`` when ``$RAY_AUTH_TOKEN`` / ``$RAY_AUTH_TOKEN_PATH`` is set and the mode is
    unset, because a driver whose mode is unset never sends a token to an explicit ``ip:port``.
    """
    environ = os.environ if environ is None else environ
    if token_path is not None:
        before = (environ.get("RAY_AUTH_MODE"), environ.get("RAY_AUTH_TOKEN_PATH"), environ.get("RAY_AUTH_TOKEN"))
        environ["RAY_AUTH_MODE"] = "token"
        environ["RAY_AUTH_TOKEN_PATH"] = token_path
        environ.pop("RAY_AUTH_TOKEN", None)
        return before != ("token", token_path, None)
    if environ.get("RAY_AUTH_MODE"):
        return False
    if environ.get("RAY_AUTH_TOKEN") or environ.get("RAY_AUTH_TOKEN_PATH"):
        environ["RAY_AUTH_MODE"] = "token"
        return True
    return False


def head_environment(environ: dict[str, str] | None = None, token_path: str | None = None) -> dict[str, str]:
    """The minimal environment of the embedded head: :data:`HEAD_ENV_VARS`, ``LC_*`` and ``RAY_*``
    (Ray's settings), without ``RAY_ADDRESS``; token auth with ``token_path`` (default: the token
    file of the default temp dir) and loopback binding (:data:`LOOPBACK_ENV`)."""
    environ = dict(os.environ if environ is None else environ)
    env = {name: environ[name] for name in HEAD_ENV_VARS if name in environ}
    env.update({k: v for k, v in environ.items() if k.startswith(("LC_", "RAY_")) and k != "RAY_ADDRESS"})
    configure_token_auth(env, token_path or embedded_token_path())
    env.update(LOOPBACK_ENV)
    return env


def _use_embedded_head(token_path: str) -> None:
    """Make this process (and the processes it starts) a client of the closed embedded head.

    Ray reads its auth mode, token and the "laptop" switch once at import; they are refreshed here
    so that a process that imported Ray earlier still connects on 127.0.0.1 with the token.
    """
    configure_token_auth(token_path=token_path)
    os.environ.update(LOOPBACK_ENV)
    from ray._private import ray_constants
    from ray._raylet import AuthenticationTokenLoader, Config

    ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address on every call
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def prepare_private_ray(temp_dir: str) -> None:
    """Close a Ray that this process starts itself with ``ray.init(_temp_dir=temp_dir)`` (benches):
    loopback only, token auth with a token generated into ``temp_dir``."""
    _own_dir(temp_dir)
    token_path = embedded_token_path(temp_dir)
    _read_or_create_token(token_path)
    _use_embedded_head(token_path)


def _head_processes(temp_dir: str, address: str | None) -> list[Any]:
    """Processes of the head started in ``temp_dir`` (and their children, e.g. Ray workers).

    Ray's own daemons carry the temp dir on their command line; the client server only carries the
    GCS address, and workers (``ray::IDLE``) are children of the raylet.
    """
    import psutil

    port = address.rpartition(":")[2] if address else None
    own = os.getpid()
    found: dict[int, Any] = {}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            cmdline = " ".join(proc.info["cmdline"] or [])
            if proc.info["pid"] == own:
                continue
            mine = temp_dir.rstrip("/") + "/" in cmdline or f"--temp-dir={temp_dir.rstrip('/')}" in cmdline
            if not mine and port and "ray" in cmdline:
                mine = "--address=" in cmdline and f":{port} " in f"{cmdline} "
            if mine:
                found[proc.pid] = proc
                for child in proc.children(recursive=True):
                    found.setdefault(child.pid, child)
    found.pop(own, None)
    return list(found.values())


def stop_embedded_head(temp_dir: str | None = None) -> None:
    """Stop the machine-local head started by :func:`start_embedded_head` (tests, shutdown).

    Only the processes of the head in ``temp_dir`` are stopped -- never ``ray stop``, which would
    kill every Ray cluster of the machine (other test sessions, other users' heads).
    """
    import psutil

    temp_dir = os.path.abspath(temp_dir or default_temp_dir())
    address_file = os.path.join(temp_dir, ADDRESS_FILE)
    address = None
    with contextlib.suppress(FileNotFoundError), open(address_file) as handle:
        address = handle.read().strip() or None
    with contextlib.suppress(Exception):
        import ray

        # A driver of this process connected to that head would otherwise hang on a dead GCS.
        if ray.is_initialized() and address:
            gcs = ray.get_runtime_context().gcs_address
            if gcs.rpartition(":")[2] == address.rpartition(":")[2]:
                ray.shutdown()
    procs = _head_processes(temp_dir, address)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=3)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=10)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address_file)


_default_config: RayClusterConfig | None = None


def set_default_config(config: RayClusterConfig | None) -> None:
    """Make ``config`` what :func:`ensure_ray` uses when called without one in this process.

    The Dagster ``RayResource`` sets it so that the step engine's plain ``ensure_ray()`` honours the
    resource's address/num_cpus/namespace without the engine knowing about Dagster.
    """
    global _default_config
    _default_config = config


def get_default_config() -> RayClusterConfig:
    """The config :func:`ensure_ray` uses when called without one."""
    return _default_config or RayClusterConfig()


def resolve_address(config: RayClusterConfig) -> str:
    """The address this process should connect to (starting the embedded head if needed)."""
    if config.address:
        return config.address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    return start_embedded_head(config)


STEPS_ON_RAY_ENV = "MARIN_STEPS_ON_RAY"
PLACEMENT_KEY = "marin/ran_on"


def steps_on_ray() -> bool:
    """Whether every step runs as a Ray task rather than in the calling (Dagster run) process.

    ``$MARIN_STEPS_ON_RAY`` (``1``/``0``) decides when set. Otherwise: yes when this process reaches
    Ray through Ray Client (``ray://``). Such a driver is a pod -- or a Dagster run process -- with no
    Ray node of its own, so computing a step in it would put the heavy work (tokenize, train, eval)
    next to the webserver instead of on the cluster's worker nodes, and libraries that drive Ray
    themselves (Levanter's cache builder) would push all their traffic through the client proxy.
    """
    value = os.environ.get(STEPS_ON_RAY_ENV, "").strip().lower()
    if value:
        return value in {"1", "true", "yes"}
    address = get_default_config().address or os.environ.get("RAY_ADDRESS") or ""
    return address.startswith("ray://")


DASHBOARD_URL_ENV = "MARIN_RAY_DASHBOARD_URL"
RAY_LINK_KEYS = ("marin/ray_job", "marin/ray_task", "marin/ray_logs")
# execution.metadata's marker of a typed value (not imported: marin_resources never imports
# marin_assets); the Dagster bridge turns {TYPE_KEY: "url", "value": u} into MetadataValue.url(u).
_METADATA_TYPE_KEY = "__marin_metadata_type__"


# Ray's metadata key of a Jobs API job's submission id (ray.dashboard.modules.job.common).
SUBMISSION_ID_KEY = "job_submission_id"
# Metadata that marks a job as a Ray Client driver registered by ensure_ray (ray_run list hides them).
DRIVER_MARK_KEY = "marin_driver"


def job_submission_id() -> str | None:
    """The submission id of the calling process's Ray job: set for jobs of the Jobs API (``ray_run``)
    and for the drivers :func:`ensure_ray` registers; None otherwise (e.g. ``dagster dev``'s embedded
    cluster). Unlike Ray's job id (``01000000``, ``02000000``, ... again after every cluster start),
    it is unique across restarts."""
    import ray

    with contextlib.suppress(Exception):
        config = ray._private.worker.global_worker.core_worker.get_job_config()
        return dict(config.metadata).get(SUBMISSION_ID_KEY) or None
    return None


def ray_placement() -> dict[str, Any]:
    """Where the calling Ray task or actor runs: node id and IP, host, pid, assigned resources, and
    the Ray job (id and submission id), task and worker ids with the worker's log file (in the
    node's Ray log folder)."""
    import socket

    import ray

    context = ray.get_runtime_context()
    job_id, worker_id = context.get_job_id(), context.get_worker_id()
    return {
        "ray_node_id": context.get_node_id(),
        "ray_node_ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "resources": {k: float(v) for k, v in sorted(context.get_assigned_resources().items())},
        "ray_job_id": job_id,
        "ray_job_submission_id": job_submission_id(),
        "ray_task_id": context.get_task_id(),
        "ray_worker_id": worker_id,
        "ray_worker_log": f"worker-{worker_id}-{job_id}-{os.getpid()}.out",
    }


def ray_links(placement: dict[str, Any], base_url: str | None = None) -> dict[str, Any]:
    """Dashboard links of a :func:`ray_placement` (URL-typed step metadata), given the dashboard's
    URL as the person's browser reaches it (``$MARIN_RAY_DASHBOARD_URL``); none when it is unset.

    ``marin/ray_job``: the Ray job; ``marin/ray_task``: the task's page (state, its logs);
    ``marin/ray_logs``: the worker's stdout in the log viewer. The job is named by its submission
    id when it has one (unique across restarts: after a restart the link opens the same job, or the
    dashboard says it is not found -- never the new cluster's job that reuses the old job id).
    """
    from urllib.parse import quote

    base = (base_url if base_url is not None else os.environ.get(DASHBOARD_URL_ENV, "")).rstrip("/")
    job = placement.get("ray_job_submission_id") or placement.get("ray_job_id")
    node = placement.get("ray_node_id")
    if not base or not job:
        return {}

    def url(path: str) -> dict[str, Any]:
        return {_METADATA_TYPE_KEY: "url", "value": f"{base}/#/{path}"}

    links = {"marin/ray_job": url(f"jobs/{quote(job)}")}
    if placement.get("ray_task_id"):
        links["marin/ray_task"] = url(f"jobs/{quote(job)}/tasks/{quote(placement['ray_task_id'])}")
    if node and placement.get("ray_worker_log"):
        links["marin/ray_logs"] = url(f"logs/viewer?nodeId={quote(node)}&fileName={quote(placement['ray_worker_log'])}")
    return links


TASK_NAME_ATTR = "ray_task_name"


def name_task(fn: Any, name: str) -> Any:
    """Mark ``fn`` so that the Ray task running it is named ``name`` (the step's name) in the
    dashboard and ``ray list tasks``, instead of the name of the innermost wrapper."""
    setattr(fn, TASK_NAME_ATTR, name)
    return fn


def task_name_of(fn: Any) -> str | None:
    """The task name :func:`name_task` gave ``fn`` (None: Ray names the task after the function)."""
    return getattr(fn, TASK_NAME_ATTR, None)


def recording_placement(fn: Any) -> Any:
    """Wrap a step function so that its metadata records where it ran (:func:`ray_placement`) and
    links to its Ray job, task and worker log (:func:`ray_links`).

    The wrapper is a plain function (``ray.remote`` and Levanter's TPU launcher need one); its result
    is the step's metadata dict with :data:`PLACEMENT_KEY` (and the links) added (a None result
    becomes that alone).
    """

    def call(config: Any) -> Any:
        result = fn(config)
        if result is not None and not isinstance(result, dict):
            return result
        placement = ray_placement()
        return {**(result or {}), PLACEMENT_KEY: placement, **ray_links(placement)}

    call.__name__ = getattr(fn, "__name__", "step")
    return call


# The Jobs API's supervisor gives its driver the job's config (submission id included) in this variable.
_JOBS_API_DRIVER_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def new_submission_id() -> str:
    """A submission id for a driver: ``marin-<UTC time>-<random>``, unique across cluster restarts."""
    import datetime
    import secrets

    return f"marin-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def _driver_entrypoint() -> str:
    """What this driver runs, as the dashboard's job list shows it (the command line, shortened)."""
    return " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])[:300] or "python"


def _put_job_info(submission_id: str, info: Any) -> None:
    import json

    from ray._private import ray_constants
    from ray.dashboard.modules.job.common import JobInfoStorageClient
    from ray.experimental.internal_kv import _internal_kv_put

    key = JobInfoStorageClient.JOB_DATA_KEY.format(job_id=submission_id)
    _internal_kv_put(key, json.dumps(info.to_json()), overwrite=True, namespace=ray_constants.KV_NAMESPACE_JOB)


def register_driver_job(metadata: dict[str, str]) -> None:
    """Record this connected driver as a job under its submission id (``metadata``), as the Jobs API
    records the jobs it starts, so that the dashboard opens ``#/jobs/<submission id>`` and its job
    list shows it (RUNNING, then SUCCEEDED when this process exits). Best effort: a cluster that
    refuses it leaves the links saying the job is not found, and the step runs all the same.

    A driver killed without exiting stays RUNNING in the list until the dashboard restarts (Ray's
    job manager then marks it FAILED, as it does for Jobs API jobs whose supervisor is gone).
    """
    import atexit

    try:
        from ray.dashboard.modules.job.common import JobInfo, JobStatus

        submission_id = metadata[SUBMISSION_ID_KEY]
        info = JobInfo(
            status=JobStatus.RUNNING,
            entrypoint=_driver_entrypoint(),
            message="a driver connected through Ray Client (marin): the tasks of its steps",
            start_time=int(time.time() * 1000),
            metadata=dict(metadata),
        )
        _put_job_info(submission_id, info)
    except Exception as exc:  # noqa: BLE001 - links are a convenience, never a reason to fail a step
        logger.warning("could not record this driver as Ray job %s: %s", metadata.get(SUBMISSION_ID_KEY), exc)
        return

    def finish() -> None:
        import ray

        with contextlib.suppress(Exception):
            if ray.is_initialized():
                info.status = JobStatus.SUCCEEDED
                info.message = "the driver exited"
                info.end_time = int(time.time() * 1000)
                _put_job_info(submission_id, info)

    atexit.register(finish)


PROGRESS_LOGGER = "marin.progress"
# Printed before each progress line of a training or evaluation subprocess (step, loss, tokens/s,
# eval results): the line lands in the Ray task's log, and a driver that receives the task's output
# (log_to_driver) finds it by this mark and logs it again to PROGRESS_LOGGER, which the Dagster
# bridge turns into the run's log lines.
PROGRESS_MARK = "[marin progress]"


def in_ray_worker() -> bool:
    """True inside a Ray task or actor (not in a driver)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    with contextlib.suppress(Exception):
        return ray._private.worker.global_worker.mode == ray.WORKER_MODE
    return False


def report_progress(line: str) -> None:
    """Report one progress line of a running step: inside a Ray worker, printed with
    :data:`PROGRESS_MARK` into the Ray task's log (the driver relogs it when the line reaches it);
    elsewhere logged to :data:`PROGRESS_LOGGER` only (the Dagster run's logs, the command line's
    run log file) -- never printed on a command line's console, which shows one line per unit."""
    if in_ray_worker():
        print(f"{PROGRESS_MARK} {line}", flush=True)
    else:
        logging.getLogger(PROGRESS_LOGGER).info(line)


# The lines relogged lately: over Ray Client a task's output can reach the driver twice (the
# client's log stream and the server-side driver's own forwarded output).
_RECENT_PROGRESS: collections.deque[str] = collections.deque(maxlen=256)


def _relog_progress(text: str) -> None:
    for raw in text.splitlines():
        at = raw.find(PROGRESS_MARK)
        if at < 0:
            continue
        line = raw[at + len(PROGRESS_MARK) :].strip()
        if line in _RECENT_PROGRESS:
            continue
        _RECENT_PROGRESS.append(line)
        logging.getLogger(PROGRESS_LOGGER).info(line)


def forward_worker_progress() -> None:
    """Log the progress lines of this driver's Ray tasks (their output forwarded to the driver) to
    :data:`PROGRESS_LOGGER`, for Ray Client and for direct connections alike (once per connection)."""
    from ray.util.client import ray as client_ray

    if client_ray.is_connected():
        log_client = client_ray.worker.log_client
        if getattr(log_client, "marin_progress", False):
            return
        printed = log_client.stdstream

        def stdstream(level: int, msg: str) -> None:
            printed(level=level, msg=msg)
            with contextlib.suppress(Exception):
                _relog_progress(msg)

        log_client.stdstream = stdstream
        log_client.marin_progress = True
    else:
        from ray._private.worker import global_worker_stdstream_dispatcher

        def handler(data: dict[str, Any]) -> None:
            with contextlib.suppress(Exception):
                _relog_progress("\n".join(data.get("lines", [])))

        global_worker_stdstream_dispatcher.remove_handler("marin_progress")  # once, after re-inits too
        global_worker_stdstream_dispatcher.add_handler("marin_progress", handler)


_INIT_LOCK = threading.Lock()
CLIENT_CONNECT_ATTEMPTS = 3


def _connect(address: str, namespace: str, runtime_env: dict[str, Any] | None, metadata: dict[str, str] | None) -> None:
    """``ray.init`` with the job's ``metadata`` (its submission id) in the job config.

    Ray Client (``ray://``) takes the job config from its connection builder only -- a ``job_config``
    given to ``ray.init`` would be sent to the server as a JSON keyword and fail -- so that path
    builds the connection as ``ray.init`` does and puts the metadata on the builder's job config.
    """
    import ray

    # Worker output in the driver's terminal; MARIN_RAY_LOG_TO_DRIVER=0 (the quickstart without
    # -v) keeps it in Ray's log files only.
    log_to_driver = os.environ.get("MARIN_RAY_LOG_TO_DRIVER", "1") != "0"
    if address.startswith("ray://"):
        builder = ray.client(address, _deprecation_warn_enabled=False).namespace(namespace)
        if runtime_env:
            builder = builder.env(runtime_env)
        if not log_to_driver:
            builder._init_args(log_to_driver=False)
        if metadata:
            builder._job_config.metadata.update(metadata)
        builder.connect()
        return
    from ray.job_config import JobConfig

    ray.init(
        address=address,
        namespace=namespace,
        runtime_env=runtime_env,
        job_config=JobConfig(metadata=dict(metadata)) if metadata else None,
        log_to_driver=log_to_driver,
        ignore_reinit_error=True,
    )


def ensure_ray(config: RayClusterConfig | None = None) -> dict[str, float]:
    """Connect this process to Ray (once) and return the cluster's resources."""
    import ray

    config = config or get_default_config()
    # Steps run in threads (the executor's max_concurrent): connect once, not once per thread.
    with _INIT_LOCK:
        if not ray.is_initialized():
            embedded = not (config.address or os.environ.get("RAY_ADDRESS"))
            if embedded:
                address = start_embedded_head(config)
                _use_embedded_head(embedded_token_path(config.temp_dir))
            else:
                if configure_token_auth():
                    # Ray read its config when it was imported: make it see the auth mode now.
                    from ray._raylet import Config

                    Config.initialize("")
                address = resolve_address(config)
            runtime_env = dict(config.runtime_env or {})
            driver_metadata = None
            if not embedded and not os.environ.get(_JOBS_API_DRIVER_ENV):
                # A driver of its own (a Dagster run's step process, executor_main): give its job a
                # submission id unique across restarts for the dashboard links (ray_links). A job of
                # the Jobs API (ray_run) already has one.
                driver_metadata = {SUBMISSION_ID_KEY: new_submission_id(), DRIVER_MARK_KEY: "ray-client"}
            if embedded:
                # The embedded head's workers have a minimal environment: this run's settings
                # (JAX platform, offline flags, emulator hosts -- no secrets) travel with its job.
                from marin_resources.runtime_env import passthrough_env_vars

                runtime_env["env_vars"] = {**passthrough_env_vars(), **runtime_env.get("env_vars", {})}
            elif os.environ.get(DASHBOARD_URL_ENV):
                # The tasks build their dashboard links (recording_placement) from the driver's URL.
                env_vars = {DASHBOARD_URL_ENV: os.environ[DASHBOARD_URL_ENV], **runtime_env.get("env_vars", {})}
                runtime_env["env_vars"] = env_vars
            start = time.monotonic()
            attempts = CLIENT_CONNECT_ATTEMPTS if address.startswith("ray://") else 1
            for attempt in range(1, attempts + 1):
                try:
                    _connect(address, config.namespace, runtime_env or None, driver_metadata)
                    break
                except (ConnectionError, RuntimeError) as exc:
                    # The Ray Client proxy starts one server process per client; on a busy head
                    # that start can time out ("Starting Ray client server failed"). Try again.
                    if attempt == attempts:
                        raise
                    logger.warning("connecting to %s failed (attempt %d): %s; retrying", address, attempt, exc)
                    with contextlib.suppress(Exception):
                        ray.shutdown()
                    time.sleep(2.0 * attempt)
            if driver_metadata is not None:
                register_driver_job(driver_metadata)
            forward_worker_progress()
            logger.info("connected to Ray at %s in %.1fs", address, time.monotonic() - start)
    return dict(ray.cluster_resources())
