"""The embedded Ray head: one local Ray per machine (per temp dir), closed, started and healed here.

No Dagster import. The first process that needs Ray starts a head node with ``ray start``-like
semantics (a detached local cluster whose address is recorded in ``<ray_temp_dir>/marin_ray_address``);
later processes connect to that address (:mod:`marin_resources.ray_connect`). Several processes of one
Dagster run (multiprocess executor), ``dagster dev`` and ``executor_main`` must not each start their
own Ray -- the second ``ray.init(num_cpus=...)`` on a machine attaches to the first cluster and fails.

Closed by default: the embedded head listens on loopback only and runs with token authentication;
its token is generated once into ``<ray_temp_dir>/marin_ray_auth_token`` (mode 0600) and every driver
that connects through ``ensure_ray`` presents it, whatever ``$RAY_AUTH_TOKEN`` the caller has (that
variable names an external cluster's token).

Healed: a head whose GCS still answers but whose raylet or agents died (``kill -9``, the OOM killer)
cannot run anything -- every driver would wait ~60 s and fail with ``Failed to connect to Ray
cluster``. :func:`start_embedded_head` checks the head's daemons, not only its GCS port, and starts a
new head, saying why, when one of them is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from marin_resources import ray_internals
from marin_resources.ray_config import RayClusterConfig

if TYPE_CHECKING:  # psutil is imported where it is used (it costs import time)
    import psutil

logger = logging.getLogger(__name__)

ADDRESS_FILE = "marin_ray_address"
TOKEN_FILE = "marin_ray_auth_token"
# Ray 2.60 turns a loopback --node-ip-address (and a driver's 127.0.0.1 address) into the machine's
# routable IP unless it believes it runs on a laptop (services.resolve_ip_for_localhost); with the
# node IP left at 127.0.0.1 the GCS server, raylet, object manager, agents, client server and every
# worker bind 127.0.0.1 instead of 0.0.0.0. It also refuses extra nodes: right for this head.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# The head's daemons without which it cannot run a task: name -> how its command line starts
# (the program, or the title the agents give themselves; before that, their script's path). A GCS that
# answers while one of these is dead makes every driver wait ~60 s for a raylet, then fail.
REQUIRED_DAEMONS = {
    "GCS server": ("/gcs_server",),
    "raylet": ("/raylet",),
    "dashboard agent": ("ray::DashboardAgent", "dashboard/agent.py"),
    "runtime_env agent": ("ray::RuntimeEnvAgent", "runtime_env/agent/main.py"),
}


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


def missing_daemons(temp_dir: str, address: str | None = None) -> list[str]:
    """The :data:`REQUIRED_DAEMONS` of the head in ``temp_dir`` that no live process runs (psutil:
    public, per-process; nothing asks Ray, whose own answer would take a minute to time out)."""
    programs = [_program(proc) for proc in _head_processes(os.path.abspath(temp_dir), address)]
    return [
        name
        for name, marks in REQUIRED_DAEMONS.items()
        if not any(program.startswith(mark) or program.endswith(mark) for program in programs for mark in marks)
    ]


def _program(proc: psutil.Process) -> str:
    """What ``proc`` runs: its program, or the script a Python runs, or the title it gave itself."""
    import psutil

    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return ""
        argv = proc.cmdline()
    except psutil.Error:  # gone between the listing and now: it runs nothing
        return ""
    if not argv:
        return ""
    if os.path.basename(argv[0]).startswith("python"):
        script = next((a for a in argv[1:] if not a.startswith("-")), "")
        return script or argv[0]
    return argv[0].split(" ")[0] if argv[0].startswith("ray::") else argv[0]


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
                    missing = missing_daemons(temp_dir, address)
                    if not os.path.exists(token_path):
                        # A head from before heads were closed (no token beside it): it may listen on
                        # every interface without authentication, so it is replaced.
                        logger.warning("replacing the embedded Ray head at %s: it has no auth token", address)
                    elif missing:
                        logger.warning(
                            "the embedded Ray head at %s (%s) lost its %s (killed?): it cannot run tasks; "
                            "stopping what is left of it and starting a new head",
                            address,
                            temp_dir,
                            ", ".join(missing),
                        )
                    else:
                        return address
                    stop_embedded_head(temp_dir)
                elif address:
                    # Its GCS is gone: whatever else of it still runs holds ports and memory.
                    stop_embedded_head(temp_dir)
            _read_or_create_token(token_path)
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


def use_embedded_head(token_path: str) -> None:
    """Make this process (and the processes it starts) a client of the closed embedded head.

    Ray reads its auth mode, token and the "laptop" switch once at import; they are refreshed here
    so that a process that imported Ray earlier still connects on 127.0.0.1 with the token.
    """
    configure_token_auth(token_path=token_path)
    os.environ.update(LOOPBACK_ENV)
    ray_internals.reload_client_settings(loopback_only=True)


def prepare_private_ray(temp_dir: str) -> None:
    """Close a Ray that this process starts itself with ``ray.init(_temp_dir=temp_dir)`` (benches):
    loopback only, token auth with a token generated into ``temp_dir``."""
    _own_dir(temp_dir)
    token_path = embedded_token_path(temp_dir)
    _read_or_create_token(token_path)
    use_embedded_head(token_path)


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


def _head_address(temp_dir: str) -> str | None:
    with contextlib.suppress(FileNotFoundError), open(os.path.join(temp_dir, ADDRESS_FILE)) as handle:
        return handle.read().strip() or None
    return None


def disconnect_driver(temp_dir: str | None = None) -> None:
    """Disconnect this process's Ray driver if it is connected to the embedded head in ``temp_dir``
    (a driver left connected to a stopped head hangs on the dead GCS, then exits the process).

    Call it from the thread that makes this process's Ray calls, never beside one: Ray ends the
    whole process, silently with status 1, when any thread calls into its core worker while or
    after it shuts down. The progress relay's thread is stopped first for the same reason.
    """
    temp_dir = os.path.abspath(temp_dir or default_temp_dir())
    address = _head_address(temp_dir)
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized() or not address:
        return
    try:
        gcs = ray.get_runtime_context().gcs_address
    except Exception as exc:  # noqa: BLE001 - a broken connection: drop it, it can only be to a dying head
        logger.warning("disconnecting from Ray before stopping the head in %s: %s", temp_dir, exc)
        gcs = address
    if gcs.rpartition(":")[2] == address.rpartition(":")[2]:
        from marin_resources.progress import stop_relays

        stop_relays()
        ray.shutdown()


def stop_embedded_head(temp_dir: str | None = None) -> None:
    """Stop the machine-local head started by :func:`start_embedded_head` (tests, shutdown).

    Only the processes of the head in ``temp_dir`` are stopped -- never ``ray stop``, which would
    kill every Ray cluster of the machine (other test sessions, other users' heads).
    """
    import psutil

    temp_dir = os.path.abspath(temp_dir or default_temp_dir())
    address_file = os.path.join(temp_dir, ADDRESS_FILE)
    address = _head_address(temp_dir)
    disconnect_driver(temp_dir)
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


def main(argv: list[str] | None = None) -> int:
    """``python -m marin_resources.ray_head {status,stop} [--temp_dir DIR]``: the embedded head of
    this machine (``$MARIN_RAY_TMPDIR`` or ``/tmp/marin-ray-<uid>``): its address and any dead daemon,
    or stop it (its processes only; never ``ray stop``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m marin_resources.ray_head", description=main.__doc__)
    parser.add_argument("command", choices=["status", "stop"])
    parser.add_argument("--temp_dir", default=None, help="the head's Ray temp dir (default: $MARIN_RAY_TMPDIR)")
    args = parser.parse_args(argv)
    temp_dir = os.path.abspath(args.temp_dir or default_temp_dir())
    if args.command == "stop":
        stop_embedded_head(temp_dir)
        print(f"stopped the embedded Ray head in {temp_dir}")
        return 0
    address = None
    with contextlib.suppress(FileNotFoundError), open(os.path.join(temp_dir, ADDRESS_FILE)) as handle:
        address = handle.read().strip() or None
    if not address or not _head_alive(address):
        print(f"no embedded Ray head running in {temp_dir}")
        return 1
    missing = missing_daemons(temp_dir, address)
    state = f"lost its {', '.join(missing)} (the next run starts a new head)" if missing else "healthy"
    print(f"embedded Ray head at {address} ({temp_dir}): {state}")
    return 0 if not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
