"""Submit an experiment to a Ray cluster as a Ray job (Marin's ``ray_run.py``), and manage jobs.

::

    python -m marin_assets.run.ray_run [--address URL] [--no_wait] [-e KEY VALUE]... \\
        [--pip_deps GROUP,...] [--working_dir DIR] [--submission_id ID] -- python experiments/x.py ...
    python -m marin_assets.run.ray_run [--address URL] list
    python -m marin_assets.run.ray_run [--address URL] logs JOB [--follow]
    python -m marin_assets.run.ray_run [--address URL] stop JOB [--no_wait]

Through the Ray Jobs API (``ray.job_submission.JobSubmissionClient``, the dashboard's HTTP port):

* the runtime env carries the working dir (``.gitignore`` respected, plus :data:`EXCLUDES`) and the
  pip requirements of the project's dependency groups -- the ones the experiment's steps name in
  ``pip_dependency_groups`` (found by importing the script in a child process) and ``--pip_deps``
  -- minus what this interpreter already has (``MARIN_RAY_PIP_SKIP_INSTALLED=0`` keeps them all);
* ``-e KEY VALUE`` variables are shipped in a throw-away package, not in the job's metadata, and
  the job's entrypoint (``marin_assets.run.job_entry``) replaces their values by ``***`` in its
  output; nothing this command prints shows them either;
* without ``--no_wait`` it follows the job's logs until the job ends and exits 0 on SUCCEEDED,
  1 otherwise;
* token authentication (Ray >= 2.60): the token comes from ``$RAY_AUTH_TOKEN``,
  ``$RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token`` (unless ``RAY_AUTH_MODE=disabled``) and is sent
  as a bearer header, never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marin_assets.run.job_entry import CONFIG_VARIABLES, ENV_FILE, ENV_MODULE_VAR, REDACTED, scrub, secret_values
from marin_resources.runtime_env import runtime_env_for

logger = logging.getLogger("marin.ray_run")

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
# Never uploaded, whatever .gitignore says (Ray also caps a working dir at 500 MiB).
EXCLUDES = [".git", ".venv", "data", ".dagster_home", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache"]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
SUBCOMMANDS = ("list", "logs", "stop")
STEP_GROUPS_TIMEOUT_S = 180


def default_address() -> str:
    """``$RAY_API_SERVER_ADDRESS``, else an http ``$RAY_ADDRESS``, else the local dashboard."""
    if os.environ.get("RAY_API_SERVER_ADDRESS"):
        return os.environ["RAY_API_SERVER_ADDRESS"]
    address = os.environ.get("RAY_ADDRESS", "")
    return address if address.startswith(("http://", "https://")) else DEFAULT_ADDRESS


def auth_headers() -> dict[str, str]:
    """``Authorization: Bearer <token>`` when a Ray auth token is available (see module doc)."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        return {}
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if not token:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        if path.is_file():
            token = path.read_text().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def make_client(address: str) -> Any:
    """A ``JobSubmissionClient`` for ``address`` with the auth header."""
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address, headers=auth_headers())


def step_dependency_groups(command: Sequence[str], working_dir: str) -> list[str]:
    """Groups the experiment's steps declare, for ``python script.py`` / ``python -m module`` commands."""
    if not command or "python" not in os.path.basename(command[0]):
        return []
    rest = list(command[1:])
    if rest[:1] == ["-m"] and len(rest) >= 2:
        target = ["-m", rest[1]]
    elif rest and rest[0].endswith(".py"):
        target = [rest[0]]
    else:
        return []
    try:
        result = subprocess.run(
            [sys.executable, "-m", "marin_assets.run.step_groups", *target],
            cwd=working_dir,
            capture_output=True,
            text=True,
            timeout=STEP_GROUPS_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.warning("could not inspect %s for dependency groups: %s", " ".join(target), exc)
        return []
    if result.returncode != 0:
        logger.warning("could not inspect %s for dependency groups: %s", " ".join(target), result.stderr[-500:])
        return []
    return list(json.loads(result.stdout.strip().splitlines()[-1]))


def build_runtime_env(working_dir: str, groups: Sequence[str], env_module_dir: str | None) -> dict[str, Any]:
    """The job's runtime env: working dir, excludes, pip of ``groups``, the secret-env package."""
    runtime_env: dict[str, Any] = {"working_dir": working_dir, "excludes": list(EXCLUDES)}
    pip = runtime_env_for(list(groups)).get("pip") if groups else None
    if pip:
        runtime_env["pip"] = pip
    if env_module_dir:
        runtime_env["py_modules"] = [env_module_dir]
        runtime_env["env_vars"] = {ENV_MODULE_VAR: os.path.basename(env_module_dir)}
    return runtime_env


def write_env_module(env: dict[str, str], parent: str) -> str:
    """A one-off package ``marin_job_env_<hex>`` holding ``env`` (readable by the owner only)."""
    name = f"marin_job_env_{uuid.uuid4().hex[:12]}"
    path = os.path.join(parent, name)
    os.makedirs(path, mode=0o700)
    # Ray names a package by the hash of its files, not its folder: the name in the content keeps
    # two submissions with the same variables from sharing (and mis-naming) one package.
    Path(path, "__init__.py").write_text(f"# {name}\n")
    fd = os.open(os.path.join(path, ENV_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(env, handle)
    return path


def entrypoint_for(command: Sequence[str]) -> str:
    """The job's entrypoint: ``job_entry`` around the user's command (same interpreter name)."""
    python = command[0] if "python" in os.path.basename(command[0]) else "python"
    return shlex.join([python, "-m", "marin_assets.run.job_entry", "--", *command])


def follow_logs(client: Any, job_id: str, secrets: Sequence[str], out: Any = None) -> None:
    """Copy the job's log to ``out`` until the job ends (secret values replaced)."""
    out = out or sys.stdout
    encoded = [s.encode() for s in secrets if len(s) >= 3]

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(scrub(chunk.encode(), encoded).decode(errors="replace"))
            out.flush()

    asyncio.run(tail())


def wait_for_end(client: Any, job_id: str, poll_s: float = 1.0, timeout_s: float | None = None) -> str:
    """The job's terminal status (polls)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = str(client.get_job_status(job_id))
        status = status.rsplit(".", 1)[-1]
        if status in TERMINAL:
            return status
        if deadline is not None and time.monotonic() > deadline:
            return status
        time.sleep(poll_s)


def redact_job(info: Any) -> dict[str, Any]:
    """A job's info as a dict safe to print: env var values of its runtime env become ``***``."""
    data = {
        "submission_id": getattr(info, "submission_id", None),
        "job_id": getattr(info, "job_id", None),
        "status": str(getattr(info, "status", "")).rsplit(".", 1)[-1],
        "entrypoint": getattr(info, "entrypoint", None),
        "start_time": getattr(info, "start_time", None),
        "end_time": getattr(info, "end_time", None),
        "message": getattr(info, "message", None),
        "metadata": getattr(info, "metadata", None),
    }
    runtime_env = dict(getattr(info, "runtime_env", None) or {})
    if isinstance(runtime_env.get("env_vars"), dict):
        runtime_env["env_vars"] = {k: REDACTED.decode() for k in runtime_env["env_vars"]}
    data["runtime_env"] = runtime_env
    return data


def submit(args: argparse.Namespace, command: list[str]) -> int:
    """Submit ``command``; follow it unless ``--no_wait``; return the exit status."""
    working_dir = os.path.abspath(args.working_dir)
    groups = [g for g in (args.pip_deps or "").split(",") if g]
    if not args.no_auto_deps:
        for group in step_dependency_groups(command, working_dir):
            if group not in groups:
                groups.append(group)
    env = {key: value for key, value in (args.env or [])}
    secrets = [v.decode() for v in secret_values(env)]
    staging = tempfile.mkdtemp(prefix="marin-ray-run-") if env else None
    try:
        env_module = write_env_module(env, staging) if staging else None
        runtime_env = build_runtime_env(working_dir, groups, env_module)
        client = make_client(args.address)
        metadata = {"marin/dependency_groups": ",".join(groups), "marin/env_keys": ",".join(sorted(env))}
        job_id = client.submit_job(
            entrypoint=entrypoint_for(command),
            runtime_env=runtime_env,
            submission_id=args.submission_id,
            metadata=metadata,
        )
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    shown = {k: v for k, v in runtime_env.items() if k != "py_modules"}
    print(
        json.dumps(
            {
                "submitted": job_id,
                "address": args.address,
                "entrypoint": shlex.join(command),
                "dependency_groups": groups,
                "env": {k: (v if k in CONFIG_VARIABLES else REDACTED.decode()) for k, v in env.items()},
                "runtime_env": shown,
            }
        ),
        flush=True,
    )
    if args.no_wait:
        print(f"not waiting; follow with: python -m marin_assets.run.ray_run logs {job_id} --follow", flush=True)
        return 0
    follow_logs(client, job_id, secrets)
    status = wait_for_end(client, job_id)
    print(json.dumps({"job": job_id, "status": status}), flush=True)
    return 0 if status == "SUCCEEDED" else 1


def build_parser() -> argparse.ArgumentParser:
    """Options of every form of the command (the command itself goes after ``--``)."""
    parser = argparse.ArgumentParser(
        prog="python -m marin_assets.run.ray_run",
        description="Run an experiment on a Ray cluster as a Ray job; list, read logs of and stop jobs.",
        epilog="submit: ray_run [options] -- python experiments/x.py ...; manage: ray_run list | logs JOB | stop JOB",
    )
    parser.add_argument("--address", default=None, help=f"Ray Jobs API (dashboard) URL (default {DEFAULT_ADDRESS})")
    parser.add_argument("--no_wait", action="store_true", help="return after submitting (or after asking to stop)")
    parser.add_argument(
        "-e", "--env", nargs=2, action="append", metavar=("KEY", "VALUE"), help="environment variable of the job"
    )
    parser.add_argument("--pip_deps", default="", help="extra dependency groups / pip requirements, comma separated")
    parser.add_argument("--no_auto_deps", action="store_true", help="do not add the groups the steps declare")
    parser.add_argument("--working_dir", default=".", help="uploaded as the job's working dir (default: .)")
    parser.add_argument("--submission_id", default=None, help="job id to use (default: Ray picks one)")
    parser.add_argument("--follow", action="store_true", help="logs: keep following until the job ends")
    parser.add_argument("action", nargs="*", help="list | logs JOB | stop JOB")
    return parser


def parse_command_line(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options (anywhere before ``--``, also after a subcommand's job id) and the command after ``--``."""
    argv = list(argv)
    head, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    args = build_parser().parse_intermixed_args(head)
    args.address = args.address or default_address()
    return args, command


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args, command = parse_command_line(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if command:
        if args.action:
            parser.error(f"unexpected {args.action} before '--'")
        return submit(args, command)
    if not args.action or args.action[0] not in SUBCOMMANDS:
        parser.error("give the command to run after '--', or one of: list, logs JOB, stop JOB")
    action, rest = args.action[0], args.action[1:]
    if action != "list" and len(rest) != 1:
        parser.error(f"{action} takes one job id")
    client = make_client(args.address)
    if action == "list":
        jobs = sorted(client.list_jobs(), key=lambda j: getattr(j, "start_time", 0) or 0)
        for job in jobs:
            print(json.dumps(redact_job(job)))
        return 0
    job_id = rest[0]
    if action == "logs":
        if args.follow:
            follow_logs(client, job_id, [])
        else:
            sys.stdout.write(client.get_job_logs(job_id))
        return 0
    stopped = client.stop_job(job_id)
    status = wait_for_end(client, job_id, timeout_s=0 if args.no_wait else 60)
    print(json.dumps({"job": job_id, "stop_requested": bool(stopped), "status": status}))
    return 0 if status in TERMINAL or args.no_wait else 1


if __name__ == "__main__":
    sys.exit(main())
