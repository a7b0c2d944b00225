"""``scripts/local_deploy.sh``: the Kubernetes topology of ``k8s/`` on one machine, 127.0.0.1 only.

``up`` starts, in this order, and records every pid in ``<state_dir>/deploy.json``:

* **Postgres** 15 (Debian), a cluster in ``<state_dir>/postgres`` -- Dagster's run, event-log and
  schedule storage; the password is generated once into ``<state_dir>/secrets`` (0600) and reaches
  Dagster as ``$DAGSTER_PG_PASSWORD``, as the chart's Secret does;
* **fake-gcs-server** (a GCS JSON-API emulator that enforces preconditions) with the bucket, objects
  kept in ``<state_dir>/gcs``: ``MARIN_PREFIX=gs://<bucket>/marin`` and Dagster's compute logs;
* a **Ray** head (``--num-cpus=0``, Ray Client server and dashboard / Jobs API on) and
  ``--ray_workers`` worker nodes (default 1; :mod:`marin_resources.deploy.ray_nodes`), all ``ray start``, with token authentication (``RAY_AUTH_MODE=token``, the token generated
  once into ``<state_dir>/secrets/ray_auth_token`` (0600) and read through ``RAY_AUTH_TOKEN_PATH``,
  never in ``~/.ray``). The dashboard binds 127.0.0.1; Ray 2.60's GCS server, raylets, Ray Client
  server and agents of a two-node cluster also listen on the machine's address (the switch that
  keeps the embedded head on loopback refuses a second node), so the token is what keeps others
  out there (docs/deploy.md lists every port);
* the **data browser** (``python -m marin_assets.browse``, started by module name: this package
  never imports ``marin_assets``) on the ``gs://`` prefix, as ``k8s/browser.yaml`` runs it;
* the **code server** (``dagster code-server start -f definitions.py``: it reloads, see
  :func:`code_server_command`), **dagster-webserver** and **dagster-daemon** as separate processes
  sharing the ``dagster.yaml`` derived from ``k8s/dagster-values.yaml``
  (:mod:`marin_resources.deploy.instance_config`).

The team's experiments repository (``--project_root`` / ``$MARIN_PROJECT_ROOT``) is the code
location's project -- its ``[tool.marin] experiments`` are the asset groups -- and is on every
process's and Ray node's ``PYTHONPATH``. After editing a script, ``reload`` (or the UI's *Reload
definitions*) shows the new code versions; ``restart-code`` restarts the code server alone.

Dagster processes get ``RAY_ADDRESS=ray://127.0.0.1:<client port>``, so every step runs as a Ray
task on a worker node (``ray_connect.steps_on_ray``), ``MARIN_BROWSER_URL`` (the browser's
address), so every asset's ``marin/browser`` metadata link opens the local browser, and
``MARIN_RAY_DASHBOARD_URL``, so every step that ran on Ray links to its task's page (its job and
logs; ``marin/ray_task``). ``env`` also exports
``RAY_API_SERVER_ADDRESS`` (the Jobs API), which ``ray_run`` uses. ``down`` stops everything by pid.

    python -m marin_resources.deploy.local up [--state_dir .local_deploy] [--webserver_port 3000] [--browser_port 8765]
                                              [--ray_dashboard_port 8265] [--project_root TEAM_REPO] [--ray_workers N]
    python -m marin_resources.deploy.local env           # shell exports to use the topology
    python -m marin_resources.deploy.local reload        # Reload definitions (edited team scripts)
    python -m marin_resources.deploy.local restart-code  # restart the code server alone
    python -m marin_resources.deploy.local down
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from marin_resources.deploy import instance_config, services
from marin_resources.deploy.dagster_services import (
    LOCATION_NAME,
    REPO,
    reload_location,
    retry_interrupted_runs,
    start_code_server,
    wait_for_in_flight_runs,
    wait_http,
    write_workspace,
)
from marin_resources.deploy.ray_nodes import (
    ray_port_names,
    start_ray,
)
from marin_resources.deploy.services import DeployError, DeployState, Service

DEFAULT_STATE_DIR = os.path.join(REPO, ".local_deploy")
# How long ``restart-code`` waits for the runs in flight (whose workers the restart would kill).
DEFAULT_RESTART_WAIT_S = 600.0
PROJECT = "marin-local"
# The Ray dashboard (Jobs API, `marin/ray_*` links): Ray's own default, fixed across restarts.
DEFAULT_DASHBOARD_PORT = 8265
DASHBOARD_PORT_ENV = "MARIN_RAY_DASHBOARD_PORT"
# The browser's own default port (marin_assets.browse.links.DEFAULT_PORT; not imported: layering).
BROWSER_PORT = 8765
# Leaked from the caller's shell, these would point the topology at another instance or cluster.
_CLEARED_ENV = (
    "RAY_ADDRESS",
    "MARIN_PREFIX",
    "MARIN_BROWSER_URL",
    "DAGSTER_HOME",
    "MARIN_STEPS_ON_RAY",
    "RAY_AUTH_TOKEN",
    # Set by ensure_ray() for the embedded head (loopback only); it makes `ray start` refuse a
    # second node, so it must not reach the topology's Ray.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
)
# What `env` exports to a shell (nothing secret: the password is read from its 0600 file).
_SHELL_ENV = (
    "DAGSTER_HOME",
    "MARIN_PREFIX",
    "MARIN_BROWSER_URL",
    "MARIN_UI_URL",
    "RAY_ADDRESS",
    "STORAGE_EMULATOR_HOST",
    "FSSPEC_GCS_TOKEN",
    "TENSORSTORE_GCS_HTTP_URL",
    "GOOGLE_AUTH_TOKEN_FOR_TESTING",
    "GOOGLE_CLOUD_PROJECT",
    "RAY_AUTH_MODE",
    "RAY_AUTH_TOKEN_PATH",
    "RAY_API_SERVER_ADDRESS",
    "MARIN_RAY_DASHBOARD_URL",
    "MARIN_PROJECT_ROOT",
)
# The ports of the topology with one Ray worker node (each further worker adds ray_port_names' own).
_PORT_NAMES = ("postgres", "gcs", *ray_port_names(1), "code_server")


def _bin(name: str) -> str:
    return os.path.join(os.path.dirname(sys.executable), name)


def topology_env(
    state_dir: str, ports: dict[str, int], bucket: str, pg_password: str, project_root: str | None = None
) -> dict[str, str]:
    """Environment of every Dagster process and Ray node (what the Helm values give the pods, plus
    the emulator). ``project_root``: the team's experiments repository (``MARIN_PROJECT_ROOT``,
    default this repository), also on ``PYTHONPATH`` so that Ray workers import its scripts' step
    functions."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED_ENV}
    env.update(
        {
            "DAGSTER_HOME": os.path.join(state_dir, "dagster_home"),
            instance_config.PASSWORD_ENV: pg_password,
            # Every GCS client is pointed at the emulator: gcsfs and google-cloud-storage (this
            # variable, anonymous credentials), tensorstore (Levanter's caches) its own variables.
            "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{ports['gcs']}",
            "FSSPEC_GCS_TOKEN": "anon",
            "TENSORSTORE_GCS_HTTP_URL": f"http://127.0.0.1:{ports['gcs']}",
            "GOOGLE_AUTH_TOKEN_FOR_TESTING": "anonymous",
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "MARIN_PREFIX": f"gs://{bucket}/marin",
            # Where every asset's `marin/browser` metadata link points (the local data browser).
            "MARIN_BROWSER_URL": f"http://127.0.0.1:{ports['browser']}",
            # The deployed webserver: what the quickstart's summary names as "UI".
            "MARIN_UI_URL": f"http://127.0.0.1:{ports['webserver']}",
            "RAY_ADDRESS": f"ray://127.0.0.1:{ports['ray_client']}",
            # The Jobs API (ray_run) and the dashboard links of step metadata.
            "RAY_API_SERVER_ADDRESS": f"http://127.0.0.1:{ports['ray_dashboard']}",
            "MARIN_RAY_DASHBOARD_URL": f"http://127.0.0.1:{ports['ray_dashboard']}",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": os.path.join(state_dir, "secrets", "ray_auth_token"),
            "JAX_PLATFORMS": env.get("JAX_PLATFORMS", "cpu"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "WANDB_MODE": env.get("WANDB_MODE", "disabled"),
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONPATH": REPO,
        }
    )
    # The project the code location serves, as the pods' MARIN_PROJECT_ROOT names the mounted one.
    root = os.path.abspath(project_root or REPO)
    env["MARIN_PROJECT_ROOT"] = root
    if root != REPO:
        env["PYTHONPATH"] = os.pathsep.join([root, REPO])
    return env


def restart_code_server(state_dir: str, wait_s: float = DEFAULT_RESTART_WAIT_S, force: bool = False) -> Service:
    """Stop the code server and start it again (its port kept), then reload the webserver's view.

    For what a reload does not pick up: a changed installed package, a new environment variable.
    Postgres, Ray, the webserver and the daemon keep running.

    A run's worker is a process of the code server (``DefaultRunLauncher``), so stopping the server
    interrupts its runs. The restart first waits up to ``wait_s`` for the runs in flight to end and
    refuses (naming them) when some are still running then, unless ``force``: then the runs are
    interrupted -- each step's lease is released, which stops its Ray task -- and they fail as
    interrupted; once the new server is up each is re-executed from failure, by Dagster's run retry
    or, where the daemon gave up on it during the restart, here (:func:`retry_interrupted_runs`).
    Steps the interrupted run finished are recorded with its seconds and run id.
    """
    state = DeployState.load(os.path.abspath(state_dir))
    if state is None:
        raise DeployError(f"no topology recorded in {state_dir}")
    old = next((s for s in state.services if s.name == "code-server"), None)
    if old is None:
        raise DeployError(f"no code server recorded in {state_dir}/deploy.json")
    running = wait_for_in_flight_runs(state, wait_s)
    if running and not force:
        names = ", ".join(f"{r['runId']} ({r['jobName']})" for r in running)
        raise DeployError(
            f"{len(running)} run(s) still in flight after {wait_s:.0f}s: {names}; restarting would interrupt "
            "them. Wait longer (--wait_s), terminate them in the UI, or pass --force to interrupt them "
            "(each is then re-executed from failure)"
        )
    if running:
        print(
            f"interrupting {len(running)} run(s); each is re-executed from failure once the server is back", flush=True
        )
    services.stop_group(old.pid)
    index = state.services.index(old)
    state.services.remove(old)
    with open(os.path.join(state.state_dir, "secrets", "postgres_password")) as handle:
        pg_password = handle.read().strip()
    env = topology_env(
        state.state_dir,
        state.ports,
        state.env["MARIN_PREFIX"].removeprefix("gs://").split("/", 1)[0],
        pg_password,
        project_root=state.env.get("MARIN_PROJECT_ROOT"),
    )
    code = start_code_server(state, env, os.path.dirname(old.log))
    # Keep the recorded order (``down`` stops in reverse: the webserver before the code server).
    state.services.remove(code)
    state.services.insert(index, code)
    state.save()
    reload_location(state)
    if running:
        retry_interrupted_runs(state, [r["runId"] for r in running])
    return code


def up(args: argparse.Namespace) -> DeployState:
    """Start the topology; returns the recorded state (raises DeployError, after stopping what
    started, when a service does not come up)."""
    state_dir = os.path.abspath(args.state_dir)
    existing = DeployState.load(state_dir)
    if existing is not None and any(services.group_processes(s.pid) for s in existing.services):
        raise DeployError(
            f"a topology is already running from {state_dir}; stop it with --down{_state_dir_flag(state_dir)} first"
        )
    os.makedirs(state_dir, exist_ok=True)
    log_dir = os.path.join(state_dir, "logs")
    ports = _allocate_ports(args)
    pg_password = services.read_or_create_secret(os.path.join(state_dir, "secrets", "postgres_password"))
    services.read_or_create_secret(os.path.join(state_dir, "secrets", "ray_auth_token"))
    env = topology_env(state_dir, ports, args.bucket, pg_password, project_root=args.project_root)
    state = DeployState(state_dir=state_dir, ports=ports)
    # Only non-secret settings are recorded (the password stays in its 0600 file).
    state.env = {k: env[k] for k in _SHELL_ENV if k in env}
    started = time.monotonic()

    def step(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)

    try:
        values = instance_config.load_values(args.values)
        _start_postgres(state, values, pg_password, log_dir, step)
        _start_gcs(state, env, args.bucket, log_dir, step)
        # The data browser needs only the bucket: started now, health-checked after Ray is up.
        browser = _start_browser(state, env, log_dir)
        nodes = start_ray(
            state,
            env,
            log_dir,
            workers=args.ray_workers,
            worker_cpus=args.worker_cpus,
            worker_object_store_mb=args.worker_object_store_mb,
            worker_gpus=args.worker_gpus,
            worker_resources=json.loads(args.worker_resources) if args.worker_resources else None,
            step=step,
        )
        head = next(s for s in state.services if s.name == "ray-head")
        workers = [s for s in state.services if s.name.startswith("ray-worker")]
        step(
            f"ray           {env['RAY_ADDRESS']}  ({len(nodes)} nodes, head pid {head.pid}, "
            f"worker pid{'s' if len(workers) > 1 else ''} {', '.join(str(w.pid) for w in workers)})"
        )
        step(f"ray jobs API  {env['RAY_API_SERVER_ADDRESS']}  (token auth)")
        wait_http(f"{env['MARIN_BROWSER_URL']}/healthz", "data browser", browser.log, 60, browser.pid)
        step(f"browser       {env['MARIN_BROWSER_URL']}  prefix {env['MARIN_PREFIX']}  (pid {browser.pid})")
        _start_dagster(state, env, values, args.bucket, log_dir, step)
    except BaseException:
        down(state_dir, quiet=True)
        raise
    state.save()
    if args.sample_drops:
        _write_sample_drops(env, args.sample_drops)
        step(f"wrote {args.sample_drops} sample drop(s) into {env['MARIN_PREFIX']}/landing")
    step(f"up in {time.monotonic() - started:.1f}s; state in {state_dir}")
    return state


def _allocate_ports(args: argparse.Namespace) -> dict[str, int]:
    names = ("postgres", "gcs", *ray_port_names(args.ray_workers), "code_server")
    ports = {name: services.free_port() for name in names}
    ports["webserver"] = args.webserver_port or services.free_port()
    ports["browser"] = args.browser_port or services.free_port()
    # Fixed (8265 unless configured) so the `marin/ray_*` links of earlier runs still point at the
    # dashboard after a restart; 0 picks a free port.
    ports["ray_dashboard"] = args.ray_dashboard_port or services.free_port()
    return ports


def _start_postgres(state: DeployState, values: dict[str, Any], password: str, log_dir: str, step: Any) -> None:
    pg = values["postgresql"]
    port = state.ports["postgres"]
    state.postgres_data = os.path.join(state.state_dir, "postgres", "data")
    pid = services.start_postgres(
        state.postgres_data, port, pg["postgresqlUsername"], pg["postgresqlDatabase"], password, log_dir
    )
    state.services.append(Service("postgres", pid, ["pg_ctl", "start"], os.path.join(log_dir, "postgres.log"), port))
    state.save()
    step(f"postgres      127.0.0.1:{port}  (pid {pid})")


def _start_gcs(state: DeployState, env: dict[str, str], bucket: str, log_dir: str, step: Any) -> None:
    port = state.ports["gcs"]
    gcs_root = os.path.join(state.state_dir, "gcs")
    os.makedirs(gcs_root, exist_ok=True)
    gcs = services.start_service("gcs", services.fake_gcs_command(port, gcs_root), env, log_dir)
    gcs.port = port
    state.services.append(gcs)
    state.save()
    services.wait_for_port(port, "fake-gcs-server", gcs.log, 30, gcs.pid)
    services.create_bucket(env["STORAGE_EMULATOR_HOST"], bucket, PROJECT)
    step(f"gcs emulator  {env['STORAGE_EMULATOR_HOST']}  bucket gs://{bucket}  (pid {gcs.pid})")


def _start_browser(state: DeployState, env: dict[str, str], log_dir: str) -> Service:
    port = state.ports["browser"]
    command = [sys.executable, "-m", "marin_assets.browse", "--prefix", env["MARIN_PREFIX"]]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    browser = services.start_service("browser", command, env, log_dir, cwd=REPO)
    browser.port = port
    state.services.append(browser)
    state.save()
    return browser


def _start_dagster(
    state: DeployState, env: dict[str, str], values: dict[str, Any], bucket: str, log_dir: str, step: Any
) -> None:
    """The code server, then the webserver and the daemon, sharing one ``dagster.yaml``."""
    ports = state.ports
    config = instance_config.instance_config(
        values, instance_config.PostgresEndpoint("127.0.0.1", ports["postgres"]), bucket
    )
    instance_config.write_instance_config(env["DAGSTER_HOME"], config)
    workspace = write_workspace(state.state_dir, ports["code_server"])
    code = start_code_server(state, env, log_dir)
    step(f"code server   127.0.0.1:{ports['code_server']}  (pid {code.pid})")
    webserver = services.start_service(
        "webserver",
        [_bin("dagster-webserver"), "-h", "127.0.0.1", "-p", str(ports["webserver"]), "-w", workspace],
        env,
        log_dir,
        cwd=state.state_dir,
    )
    webserver.port = ports["webserver"]
    daemon = services.start_service(
        "daemon", [_bin("dagster-daemon"), "run", "-w", workspace], env, log_dir, cwd=state.state_dir
    )
    state.services.extend([webserver, daemon])
    state.save()
    url = f"http://127.0.0.1:{ports['webserver']}"
    wait_http(f"{url}/server_info", "dagster-webserver", webserver.log, 180, webserver.pid)
    step(f"webserver     {url}  (pid {webserver.pid}); daemon pid {daemon.pid}")


def _write_sample_drops(env: dict[str, str], drops: int) -> None:
    command = [sys.executable, "-m", "marin_assets.experiments.sample_data", "--prefix", env["MARIN_PREFIX"]]
    subprocess.run([*command, "--drops", str(drops)], env=env, cwd=REPO, check=True)


def down(state_dir: str, quiet: bool = False) -> list[str]:
    """Stop every process ``up`` recorded (in reverse order), by pid; returns the names stopped."""
    state_dir = os.path.abspath(state_dir)
    state = DeployState.load(state_dir)
    if state is None:
        if not quiet:
            print(f"nothing to stop: no {state_dir}/deploy.json")
        return []
    stopped = []
    for service in reversed(state.services):
        if service.name == "postgres":
            if state.postgres_data:
                services.stop_postgres(state.postgres_data)
        else:
            services.stop_group(service.pid)
        stopped.append(service.name)
        if not quiet:
            print(f"stopped {service.name} (pid {service.pid})", flush=True)
    if state.ray_temp_dir and os.path.isdir(state.ray_temp_dir):
        # Ray's sessions and sockets of this topology (under /tmp: socket paths must be short).
        shutil.rmtree(state.ray_temp_dir, ignore_errors=True)
    state.services = []
    state.save()
    return stopped


def shell_env(state_dir: str) -> str:
    """``export`` lines that point a shell at the running topology (the password read from its file)."""
    state = DeployState.load(os.path.abspath(state_dir))
    if state is None:
        raise DeployError(f"no topology recorded in {state_dir}")
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(state.env.items())]
    secrets_dir = os.path.join(os.path.abspath(state_dir), "secrets")
    lines.append(
        f'export {instance_config.PASSWORD_ENV}="$(cat {shlex.quote(os.path.join(secrets_dir, "postgres_password"))})"'
    )
    return "\n".join(lines)


def _state_dir_flag(state_dir: str) -> str:
    """`` --state_dir X`` when ``X`` is not where a bare command looks (a suggested command must work)."""
    default = os.path.abspath(os.environ.get("MARIN_DEPLOY_STATE", DEFAULT_STATE_DIR))
    return "" if os.path.abspath(state_dir) == default else f" --state_dir {shlex.quote(state_dir)}"


def build_parser() -> argparse.ArgumentParser:
    """Command line of the local topology."""
    parser = argparse.ArgumentParser(description="The production topology on one machine (127.0.0.1 only)")
    parser.add_argument(
        "command",
        choices=["up", "down", "status", "env", "reload", "restart-code"],
        nargs="?",
        default="up",
        help="reload: the code location's definitions (the UI's *Reload definitions*); "
        "restart-code: stop and start the code server alone",
    )
    parser.add_argument("--down", action="store_true", help="same as the `down` command")
    parser.add_argument(
        "--wait_s",
        type=float,
        default=DEFAULT_RESTART_WAIT_S,
        help="restart-code: how long to wait for the runs in flight to end before refusing",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="restart-code: interrupt the runs still in flight (each is then re-executed from failure)",
    )
    parser.add_argument("--state_dir", default=os.environ.get("MARIN_DEPLOY_STATE", DEFAULT_STATE_DIR))
    parser.add_argument(
        "--values", default=None, help="Helm values to derive dagster.yaml from (k8s/dagster-values.yaml)"
    )
    parser.add_argument("--bucket", default="marin-local")
    parser.add_argument("--webserver_port", type=int, default=3000, help="0: any free port")
    parser.add_argument("--browser_port", type=int, default=BROWSER_PORT, help="data browser; 0: any free port")
    parser.add_argument(
        "--ray_dashboard_port",
        type=int,
        default=int(os.environ.get(DASHBOARD_PORT_ENV) or DEFAULT_DASHBOARD_PORT),
        help=f"Ray dashboard / Jobs API port, kept across restarts (${DASHBOARD_PORT_ENV}; 0: any free port)",
    )
    parser.add_argument(
        "--project_root",
        default=os.environ.get("MARIN_PROJECT_ROOT"),
        help="the team's experiments repository (its pyproject.toml's [tool.marin] experiments); "
        "default $MARIN_PROJECT_ROOT, else this repository",
    )
    parser.add_argument(
        "--ray_workers", type=int, default=1, help="Ray worker nodes next to the head (the head runs no steps)"
    )
    parser.add_argument("--worker_cpus", type=int, default=8, help="logical CPUs of each Ray worker node")
    parser.add_argument("--worker_gpus", type=int, default=0, help="GPUs each Ray worker node advertises")
    parser.add_argument("--worker_resources", default=None, help="JSON custom resources of each worker node")
    parser.add_argument("--worker_object_store_mb", type=int, default=1024)
    parser.add_argument("--sample_drops", type=int, default=0, help="write drop-001..N into the landing zone")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``scripts/local_deploy.sh``."""
    args = build_parser().parse_args(argv)
    command = "down" if args.down else args.command
    try:
        if command == "down":
            down(args.state_dir)
        elif command == "reload":
            state = DeployState.load(os.path.abspath(args.state_dir))
            if state is None:
                raise DeployError(f"no topology recorded in {args.state_dir}")
            started = time.monotonic()
            reload_location(state)
            print(f"reloaded code location {LOCATION_NAME} in {time.monotonic() - started:.1f}s")
        elif command == "restart-code":
            started = time.monotonic()
            code = restart_code_server(args.state_dir, args.wait_s, args.force)
            print(f"code server restarted (pid {code.pid}) and reloaded in {time.monotonic() - started:.1f}s")
        elif command == "env":
            print(shell_env(args.state_dir))
        elif command == "status":
            state = DeployState.load(os.path.abspath(args.state_dir))
            report: Any = services.describe(state.services) if state else []
            print(json.dumps(report, indent=2))
        else:
            state = up(args)
            print(f"\nUI:       http://127.0.0.1:{state.ports['webserver']}")
            print(f"browser:  {state.env['MARIN_BROWSER_URL']}  (data under {state.env['MARIN_PREFIX']})")
            print(f"ray jobs: {state.env['RAY_API_SERVER_ADDRESS']}  (ray_run; token auth, after `env` below)")
            print(f'use:      eval "$(scripts/local_deploy.sh env --state_dir {shlex.quote(state.state_dir)})"')
            print(f"stop:     scripts/local_deploy.sh --down{_state_dir_flag(state.state_dir)}")
    except DeployError as exc:
        print(f"local_deploy: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
