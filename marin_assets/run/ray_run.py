"""Submit an experiment to a Ray cluster as a Ray job (Marin's ``ray_run.py``), and manage jobs.

::

    python -m marin_assets.run.ray_run [--address URL] [--no_wait] [-e KEY VALUE | -e KEY=VALUE]... \\
        [--pip_deps GROUP,...] [--working_dir DIR] [--submission_id ID] -- python experiments/x.py ...
    python -m marin_assets.run.ray_run [--address URL] list [--all]
    python -m marin_assets.run.ray_run [--address URL] logs JOB [--follow]
    python -m marin_assets.run.ray_run [--address URL] stop JOB [--no_wait]

Through the Ray Jobs API (``ray.job_submission.JobSubmissionClient``, the dashboard's HTTP port):

* the address: ``--address``, else ``$RAY_API_SERVER_ADDRESS``, else ``$RAY_ADDRESS``, else
  :data:`DEFAULT_ADDRESS` (:func:`jobs_api_url`); an ``http(s)://`` URL is the Jobs API itself, a
  Ray Client address ``ray://host:port`` maps to that host's dashboard (the port of
  ``$RAY_API_SERVER_ADDRESS`` when it names the same host, else 8265). A cluster that cannot be
  reached, or refuses the token, is reported in one line (exit status 2);
* the runtime env carries the working dir (``.gitignore`` respected, plus :data:`EXCLUDES`), the
  project's Python -- ``PATH`` starts with the ``bin`` directory of the interpreter running this
  command, so ``python`` in the entrypoint is the project's venv wherever the cluster was started --
  and the pip requirements of the project's dependency groups -- the ones the experiment's steps
  name in ``pip_dependency_groups`` (found by importing the script in a child process) and
  ``--pip_deps`` -- minus what this interpreter already has (``MARIN_RAY_PIP_SKIP_INSTALLED=0``
  keeps them all);
* ``-e KEY VALUE`` (or ``-e KEY=VALUE``) variables are shipped in a throw-away package, not in the job's metadata, and
  the job's entrypoint (``marin_assets.run.job_entry``) replaces their values by ``***`` in its
  output -- whole, multi-line ones too, and in their ``repr`` / JSON escaped forms; nothing this
  command prints shows them either;
* without ``--no_wait`` it follows the job's logs until the job ends, then prints the job's status
  and exit code and exits 0 on SUCCEEDED, else with the job's exit code (1 when it has none);
* ``list`` prints a table (``--json``: one JSON object per job, env values hidden) of the jobs
  submitted through the Jobs API; the Ray Client sessions of the code location and of Dagster runs
  (Ray's driver jobs, and the drivers ``ensure_ray`` records for their dashboard links) are left out
  and counted (``--all`` lists them too);
* token authentication (Ray >= 2.60): the token comes from ``$RAY_AUTH_TOKEN``,
  ``$RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token`` (unless ``RAY_AUTH_MODE=disabled``) and is sent
  as a bearer header, never printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from marin_assets.execution.secrets import REDACTED, StreamScrubber
from marin_assets.run.job_entry import CONFIG_VARIABLES, ENV_FILE, ENV_MODULE_VAR, secret_values
from marin_resources.ray_jobs import DRIVER_MARK_KEY
from marin_resources.runtime_env import runtime_env_for

logger = logging.getLogger("marin.ray_run")

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
DEFAULT_DASHBOARD_PORT = 8265
# Never uploaded, whatever .gitignore says (Ray also caps a working dir at 500 MiB).
EXCLUDES = [".git", ".venv", "data", ".dagster_home", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache"]
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
SUBCOMMANDS = ("list", "logs", "stop")
_ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)

STEP_GROUPS_TIMEOUT_S = 180


class RayRunError(Exception):
    """A failure this command reports in one line (no traceback)."""


def default_address() -> str:
    """``$RAY_API_SERVER_ADDRESS``, else ``$RAY_ADDRESS`` (http or ``ray://``), else the local dashboard.

    A ``host:port`` ``$RAY_ADDRESS`` is a GCS address, not the Jobs API: it is not used.
    """
    if os.environ.get("RAY_API_SERVER_ADDRESS"):
        return os.environ["RAY_API_SERVER_ADDRESS"]
    address = os.environ.get("RAY_ADDRESS", "")
    return address if address.startswith(("http://", "https://", "ray://")) else DEFAULT_ADDRESS


def jobs_api_url(address: str) -> str:
    """The Jobs API URL for ``address``: an http(s) URL as is; ``ray://host:port`` (Ray Client) ->
    ``http://host:<dashboard port>``; ``host:port`` -> ``http://host:port``.

    The dashboard port of a ``ray://`` address is that of ``$RAY_API_SERVER_ADDRESS`` when that URL
    names the same host (``scripts/local_deploy.sh env`` exports both), else Ray's default 8265.
    Never goes through Ray Client (Ray's own resolution connects a whole client to ask).
    """
    from urllib.parse import urlsplit

    address = address.strip().rstrip("/")
    if address.startswith(("http://", "https://")):
        return address
    if address in {"auto", "local", ""}:
        return DEFAULT_ADDRESS
    if address.startswith("ray://"):
        host = urlsplit(address).hostname
        if not host:
            raise RayRunError(f"cannot read a host from {address!r}; pass --address http://<head>:<dashboard port>")
        port = DEFAULT_DASHBOARD_PORT
        api = os.environ.get("RAY_API_SERVER_ADDRESS", "")
        if api.startswith(("http://", "https://")) and urlsplit(api).hostname == host and urlsplit(api).port:
            port = urlsplit(api).port
        return f"http://{host}:{port}"
    if "://" in address:
        raise RayRunError(
            f"unsupported address {address!r}: give http://<head>:<dashboard port> or ray://<head>:<port>"
        )
    return f"http://{address}"


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


@contextlib.contextmanager
def _without_ray_address_env() -> Iterator[None]:
    """Ray's ``JobSubmissionClient`` replaces its ``address`` argument by ``$RAY_API_SERVER_ADDRESS``
    or ``$RAY_ADDRESS`` (and resolves a ``ray://`` one through Ray Client): hide both while it is
    built, so ``--address`` wins."""
    saved = {k: os.environ.pop(k) for k in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def make_client(address: str) -> Any:
    """A ``JobSubmissionClient`` for the Jobs API of ``address`` with the auth header.

    Raises :class:`RayRunError` (one line) when the API cannot be reached or refuses the token.
    """
    from ray.job_submission import JobSubmissionClient

    url = jobs_api_url(address)
    try:
        with _without_ray_address_env():
            return JobSubmissionClient(url, headers=auth_headers())
    except Exception as exc:  # noqa: BLE001 -- Ray raises ConnectionError, RuntimeError, AuthenticationError
        raise RayRunError(f"cannot use the Ray Jobs API at {url}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


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


def project_python_env() -> dict[str, str]:
    """Job env vars that make ``python`` the interpreter running this command (its venv's ``bin``
    first on ``PATH``; Ray expands ``${PATH}`` on the node), not whatever the cluster's PATH has."""
    env = {"PATH": f"{os.path.dirname(sys.executable)}:${{PATH}}"}
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def build_runtime_env(working_dir: str, groups: Sequence[str], env_module_dir: str | None) -> dict[str, Any]:
    """The job's runtime env: working dir, excludes, the project's Python, pip of ``groups``, the
    secret-env package."""
    runtime_env: dict[str, Any] = {"working_dir": working_dir, "excludes": list(EXCLUDES)}
    pip = runtime_env_for(list(groups)).get("pip") if groups else None
    if pip:
        runtime_env["pip"] = pip
    runtime_env["env_vars"] = project_python_env()
    if env_module_dir:
        runtime_env["py_modules"] = [env_module_dir]
        runtime_env["env_vars"][ENV_MODULE_VAR] = os.path.basename(env_module_dir)
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


def follow_logs(client: Any, job_id: str, secrets: Sequence[bytes], out: Any = None) -> None:
    """Copy the job's log to ``out`` until the job ends (secret forms replaced, also across chunks)."""
    out = out or sys.stdout
    scrubber = StreamScrubber(list(secrets))

    async def tail() -> None:
        async for chunk in client.tail_job_logs(job_id):
            out.write(scrubber.feed(chunk.encode()).decode(errors="replace"))
            out.flush()
        out.write(scrubber.flush().decode(errors="replace"))
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


def _status_name(value: Any) -> str:
    return str(value or "").rsplit(".", 1)[-1]


def redact_job(info: Any) -> dict[str, Any]:
    """A job's info as a dict safe to print: env var values of its runtime env become ``***``."""
    data = {
        "submission_id": getattr(info, "submission_id", None),
        "job_id": getattr(info, "job_id", None),
        "status": _status_name(getattr(info, "status", "")),
        "exit_code": getattr(info, "driver_exit_code", None),
        "entrypoint": getattr(info, "entrypoint", None),
        "start_time": getattr(info, "start_time", None),
        "end_time": getattr(info, "end_time", None),
        "message": getattr(info, "message", None),
        "metadata": getattr(info, "metadata", None),
    }
    runtime_env = dict(getattr(info, "runtime_env", None) or {})
    if isinstance(runtime_env.get("env_vars"), dict):
        runtime_env["env_vars"] = {k: REDACTED for k in runtime_env["env_vars"]}
    data["runtime_env"] = runtime_env
    return data


def is_client_session(job: Any) -> bool:
    """A job that is no Jobs API submission: a driver that connected by itself (Ray's ``DRIVER``
    jobs: the code location's and Dagster runs' Ray Client sessions, a notebook) or one that
    ``ensure_ray`` recorded under a submission id of its own for its dashboard links."""
    if _status_name(getattr(job, "type", "")).upper() == "DRIVER":
        return True
    return bool((getattr(job, "metadata", None) or {}).get(DRIVER_MARK_KEY))


def _user_command(entrypoint: str | None) -> str:
    """The user's command of a ``job_entry`` entrypoint (what was given after ``--``)."""
    text = entrypoint or ""
    marker = "marin_assets.run.job_entry -- "
    return text.split(marker, 1)[1] if marker in text else text


def _clock(ms: Any) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(start_ms: Any, end_ms: Any) -> str:
    if not start_ms:
        return "-"
    seconds = int(((end_ms or time.time() * 1000) - start_ms) / 1000)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def jobs_table(jobs: Sequence[Any], width: int = 60) -> str:
    """``list``'s table: submission id, status, exit code, start (UTC), duration, command."""
    rows = [("SUBMISSION ID", "STATUS", "EXIT", "STARTED (UTC)", "DURATION", "COMMAND")]
    for job in jobs:
        data = redact_job(job)
        command = _user_command(data["entrypoint"])
        if len(command) > width:
            command = command[: width - 3] + "..."
        code = data["exit_code"]
        rows.append(
            (
                str(data["submission_id"] or data["job_id"] or "-"),
                data["status"] or "-",
                "-" if code is None else str(code),
                _clock(data["start_time"]),
                _duration(data["start_time"], data["end_time"]),
                command,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]]) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def exit_code_of(client: Any, job_id: str, status: str) -> int | None:
    """The job's entrypoint exit code (None when it never ran or Ray did not record one)."""
    if status == "SUCCEEDED":
        return 0
    try:
        return client.get_job_info(job_id).driver_exit_code
    except Exception as exc:  # noqa: BLE001 - the exit status falls back to 1, which still says "failed"
        logger.warning("could not read the exit code of job %s (%s); exiting with 1", job_id, _first_line(exc))
        return None


def command_status(status: str, code: int | None) -> int:
    """This command's exit status for a finished job: 0, the job's exit code, or 1."""
    if status == "SUCCEEDED":
        return 0
    return code if code is not None and 0 < code < 256 else 1


def submit(args: argparse.Namespace, command: list[str]) -> int:
    """Submit ``command``; follow it unless ``--no_wait``; return the exit status."""
    working_dir = os.path.abspath(args.working_dir)
    groups = [g for g in (args.pip_deps or "").split(",") if g]
    if not args.no_auto_deps:
        for group in step_dependency_groups(command, working_dir):
            if group not in groups:
                groups.append(group)
    env = {key: value for key, value in (args.env or [])}
    secrets = secret_values(env)
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
                "address": jobs_api_url(args.address),
                "entrypoint": shlex.join(command),
                "dependency_groups": groups,
                "env": {k: (v if k in CONFIG_VARIABLES else REDACTED) for k, v in env.items()},
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
    code = exit_code_of(client, job_id, status)
    print(json.dumps({"job": job_id, "status": status, "exit_code": code}), flush=True)
    if status != "SUCCEEDED":
        print(f"ray_run: job {job_id} {status}, exit code {'none' if code is None else code}", file=sys.stderr)
    return command_status(status, code)


def build_parser(prog: str = "python -m marin_assets.run.ray_run") -> argparse.ArgumentParser:
    """Options of every form of the command (the command itself goes after ``--``); ``prog`` is how
    the user called it (``marin ray-run`` from the console script)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run an experiment on a Ray cluster as a Ray job; list, read logs of and stop jobs.",
        epilog="submit: ray_run [options] -- python experiments/x.py ...; manage: ray_run list | logs JOB | stop JOB",
    )
    parser.add_argument(
        "--address",
        default=None,
        help="Ray Jobs API (dashboard) URL or ray://host:port; wins over $RAY_API_SERVER_ADDRESS / $RAY_ADDRESS "
        f"(default {DEFAULT_ADDRESS})",
    )
    parser.add_argument("--no_wait", action="store_true", help="return after submitting (or after asking to stop)")
    parser.add_argument(
        "-e",
        "--env",
        nargs=2,
        action="append",
        metavar=("KEY", "VALUE"),
        help="environment variable of the job: -e KEY VALUE or -e KEY=VALUE",
    )
    parser.add_argument("--pip_deps", default="", help="extra dependency groups / pip requirements, comma separated")
    parser.add_argument("--no_auto_deps", action="store_true", help="do not add the groups the steps declare")
    parser.add_argument("--working_dir", default=".", help="uploaded as the job's working dir (default: .)")
    parser.add_argument("--submission_id", default=None, help="job id to use (default: Ray picks one)")
    parser.add_argument("--follow", action="store_true", help="logs: keep following until the job ends")
    parser.add_argument("--json", action="store_true", help="list: one JSON object per job instead of a table")
    parser.add_argument(
        "--all", action="store_true", help="list: also the Ray Client sessions (code location, Dagster runs)"
    )
    parser.add_argument("action", nargs="*", help="list | logs JOB | stop JOB")
    return parser


def split_env_assignments(argv: Sequence[str]) -> list[str]:
    """``-e KEY=VALUE`` / ``--env KEY=VALUE`` / ``--env=KEY=VALUE`` as ``-e KEY VALUE`` (the form the
    parser takes). A token after ``-e`` is split only when it starts with a variable name and ``=``:
    in ``-e KEY A=B`` the value is ``A=B``."""
    out: list[str] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--env="):  # the option and its first argument in one token
            tokens.insert(i + 1, token.split("=", 1)[1])
            token = "--env"
        out.append(token)
        if token in ("-e", "--env") and i + 1 < len(tokens):
            match = _ENV_ASSIGNMENT.match(tokens[i + 1])
            if match:
                out.extend(match.groups())
                i += 1
        i += 1
    return out


def parse_command_line(argv: Sequence[str], prog: str | None = None) -> tuple[argparse.Namespace, list[str]]:
    """Options (anywhere before ``--``, also after a subcommand's job id) and the command after ``--``."""
    argv = list(argv)
    head, command = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    parser = build_parser(prog) if prog else build_parser()
    args = parser.parse_intermixed_args(split_env_assignments(head))
    args.address = args.address or default_address()
    return args, command


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Entry point; returns the exit status (2: the cluster could not be used, reported in one line)."""
    args, command = parse_command_line(sys.argv[1:] if argv is None else argv, prog)
    parser = build_parser(prog) if prog else build_parser()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if command:
        if args.action:
            parser.error(f"unexpected {args.action} before '--'")
    elif not args.action or args.action[0] not in SUBCOMMANDS:
        parser.error("give the command to run after '--', or one of: list, logs JOB, stop JOB")
    elif args.action[0] != "list" and len(args.action) != 2:
        parser.error(f"{args.action[0]} takes one job id")
    try:
        return submit(args, command) if command else manage(args)
    except RayRunError as exc:
        print(f"ray_run: {exc}", file=sys.stderr)
        return 2
    except (ConnectionError, OSError, RuntimeError, ValueError) as exc:
        # A request to a reachable Jobs API failed (unknown job id, cluster went away, ...).
        print(f"ray_run: {_first_line(exc)}", file=sys.stderr)
        return 2


def manage(args: argparse.Namespace) -> int:
    """``list`` / ``logs JOB`` / ``stop JOB``."""
    action, rest = args.action[0], args.action[1:]
    client = make_client(args.address)
    if action == "list":
        every = sorted(client.list_jobs(), key=lambda j: getattr(j, "start_time", 0) or 0)
        jobs = every if args.all else [job for job in every if not is_client_session(job)]
        if args.json:
            for job in jobs:
                print(json.dumps(redact_job(job)))
        else:
            print(jobs_table(jobs))
            if len(jobs) < len(every):
                print(f"({len(every) - len(jobs)} Ray Client sessions not shown; --all lists them)")
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
