"""UI-run benchmark: N independent steps through the UI path vs through ``executor_main``.

Writes a small project whose steps either sleep (``--seconds``) or do CPU-light work (a short
loop), then for N in ``--counts`` (1, 8, 32):

* **cli**: ``python run_cli.py --no_record`` -- ``executor_main`` over the N steps, from process
  start to exit (every ready step at once, its default);
* **ui**: GraphQL ``launchRun`` on ``__ASSET_JOB`` with the N assets selected (what *Materialize
  all* sends) to a running ``dagster dev`` on the same project, from the launch until the run is
  SUCCESS (the run queue, the run worker's start and the location load included). Its instance is
  the one ``scripts/dagster_home.sh`` writes for users (run queue, dequeue interval).

``watched`` steps sleep like ``sleep`` ones but are watched (an op each in a UI run, ``step_ops``):
independent watched ops of one run run at once (the multiprocess executor), which this measures.
The fixed cost is compared with plain Dagster's own: a one-asset run of a no-op ``@asset`` in the
same ``dagster dev``, with Dagster's default executor and with the in-process one.

Each side computes fresh steps (their versions differ), so nothing is cached. Prints both walls,
the ratio ui/cli (goal <= 1.1) and the fixed cost of a UI run (a one-step run of a no-op step,
minus the same through ``executor_main``), with the load average beside them. ``--phases`` adds
where each UI run's time went, from the run's own event log (webserver, queue, run worker start,
location load, executor, the op's planning, the steps, the end; when short steps end before the
last one starts, two step phases overlap and one reads negative); ``--events`` lists the no-op
run's events with their times.

    python -m bench.ui_run [--counts 1 8 32] [--seconds 5] [--kinds sleep cpu watched] [--phases] [--events]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STEPS_MODULE = '''
"""The benchmark's steps: N independent steps that sleep or loop."""
import json
import os
import time
from dataclasses import dataclass

from marin_assets.execution import ExecutorStep, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class WorkConfig:
    output_path: str
    kind: str
    seconds: float
    tag: str


def work(config: WorkConfig) -> dict:
    start = time.time()
    if config.kind in ("sleep", "watched"):
        time.sleep(config.seconds)
    elif config.kind == "cpu":
        total = 0
        for i in range(int(config.seconds * 2_000_000)):
            total += i * i
    atomic_write_text(os.path.join(config.output_path, "done.json"), json.dumps({"start": start, "end": time.time()}))
    return {"seconds": time.time() - start}


def steps(count, kind, seconds, side):
    return [
        ExecutorStep(
            f"{kind}{count}/s{i:02d}",
            work,
            WorkConfig(this_output_path(), kind, versioned(seconds), versioned(f"{side}-{i}")),
            watched=True if kind == "watched" else None,  # an op of its own in a UI run
        )
        for i in range(count)
    ]
'''

CLI = """
import os
import sys

from benchsteps import steps
from marin_assets.execution.executor_main import executor_main

if __name__ == "__main__":
    count, kind, seconds = int(os.environ["BENCH_COUNT"]), os.environ["BENCH_KIND"], float(os.environ["BENCH_SECONDS"])
    executor_main(steps=steps(count, kind, seconds, "cli"))
"""

LOCATION = """
import json
import os

from benchsteps import steps
from marin_assets.execution.declarations import Experiment
from marin_assets.definitions import build_definitions

import dagster as dg

GROUPS = json.loads(os.environ["BENCH_GROUPS"])
EXPERIMENTS = [Experiment(name=f"{kind}{count}", steps=steps(count, kind, seconds, "ui")) for count, kind, seconds in GROUPS]


# The baseline: a plain Dagster asset that does nothing, in jobs with Dagster's default executor
# (multiprocess) and with the in-process one.
@dg.asset(key=["plain", "noop"], group_name="plain")
def plain_noop() -> None:
    return None


plain_jobs = [
    dg.define_asset_job("plain_default_job", selection=[plain_noop.key], executor_def=dg.multiprocess_executor),
    dg.define_asset_job("plain_in_process_job", selection=[plain_noop.key], executor_def=dg.in_process_executor),
]
# One Definitions object in the module (the loader takes the module's only one).
defs = dg.Definitions.merge(build_definitions(EXPERIMENTS), dg.Definitions(assets=[plain_noop], jobs=plain_jobs))

"""

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
  }
}
"""
RUN = "query R($id: ID!) { runOrError(runId: $id) { ... on Run { status startTime endTime } } }"
WORKSPACE = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(url: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        payload = json.loads(response.read())
    if payload.get("errors"):
        raise RuntimeError(payload["errors"])
    return payload["data"]


def _wait_loaded(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {process.returncode}")
        try:
            entries = _graphql(url, WORKSPACE)["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError("dagster dev did not load the location")


@dataclass(frozen=True)
class UiRun:
    """One UI run as the bench saw it: when it launched (wall clock), how long until SUCCESS."""

    run_id: str
    launched_at: float
    wall: float
    in_run: float


def ui_wall(url: str, count: int, kind: str, job: str = "__ASSET_JOB") -> UiRun:
    """The run of ``count`` steps of ``kind`` (or of the plain-Dagster ``job``): launchRun until
    the webserver says SUCCESS."""
    selector: dict[str, Any] = {"repositoryLocationName": "marin", "repositoryName": "__repository__", "jobName": job}
    if job == "__ASSET_JOB":
        selector["assetSelection"] = [{"path": [f"{kind}{count}", f"s{i:02d}"]} for i in range(count)]
    params = {"selector": selector, "runConfigData": {}}
    launched_at = time.time()
    start = time.perf_counter()
    launched = _graphql(url, LAUNCH, {"params": params})["launchRun"]
    if launched["__typename"] != "LaunchRunSuccess":
        raise RuntimeError(launched)
    run_id = launched["run"]["runId"]
    while True:
        run = _graphql(url, RUN, {"id": run_id})["runOrError"]
        if run["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            wall = time.perf_counter() - start
            if run["status"] != "SUCCESS":
                raise RuntimeError(f"UI run {run_id} of {kind}{count}: {run['status']}")
            return UiRun(run_id, launched_at, wall, (run["endTime"] or 0) - (run["startTime"] or 0))
        time.sleep(0.1)


# The phases of a UI run, each ending at the first (LAST: the last) event that matches
# "EVENT_TYPE[:text in its message]" or "MESSAGE:text" (a log line of the op).
PHASES = (
    ("webserver (launchRun -> RUN_ENQUEUED)", "RUN_ENQUEUED"),
    ("queue (-> RUN_STARTING: daemon tick, launcher)", "RUN_STARTING"),
    ("run worker start (python, Dagster's imports)", "ENGINE_EVENT:Started process for run"),
    ("location load in the run worker (-> RUN_START)", "RUN_START"),
    ("executor start (-> STEP_START)", "STEP_START"),
    ("op planning (-> first step started)", "MESSAGE:: started ("),
    ("steps started (-> last step started)", "LAST:MESSAGE:: started ("),
    ("steps run (-> first step done)", "MESSAGE:: done in "),
    ("results written (-> last materialization)", "LAST:ASSET_MATERIALIZATION"),
    ("op end (-> STEP_SUCCESS)", "STEP_SUCCESS"),
    ("run end (-> RUN_SUCCESS)", "RUN_SUCCESS"),
)


def _matches(entry: Any, what: str) -> bool:
    kind, _, text = what.removeprefix("LAST:").partition(":")
    event_type = entry.dagster_event_type
    if kind == "MESSAGE":
        return event_type is None and text in entry.message
    return event_type is not None and event_type.name == kind and text in entry.message


def _run_logs(home: str, run_id: str) -> list[Any]:
    import dagster as dg

    with dg.DagsterInstance.from_config(home) as instance:
        return list(instance.all_logs(run_id))


def run_phases(home: str, run: UiRun) -> list[tuple[str, float]]:
    """Seconds of each phase of ``run`` by its own event log's timestamps, then until the bench
    saw SUCCESS; a phase whose event is missing is NaN and the next one counts from the last found."""
    entries = _run_logs(home, run.run_id)
    phases: list[tuple[str, float]] = []
    previous = run.launched_at
    for name, what in PHASES:
        hits = [e.timestamp for e in entries if _matches(e, what)]
        if not hits:
            phases.append((name, float("nan")))
            continue
        at = max(hits) if what.startswith("LAST:") else min(hits)
        phases.append((name, at - previous))
        previous = at
    phases.append(("bench sees SUCCESS (its 0.1 s poll)", run.launched_at + run.wall - previous))
    return phases


def _print_events(home: str, run: UiRun) -> None:
    for entry in _run_logs(home, run.run_id):
        kind = entry.dagster_event_type.name if entry.dagster_event_type else "LOG"
        text = entry.message.replace("\n", " ")[:70]
        print(f"      +{entry.timestamp - run.launched_at:6.2f} s  {kind:<29} {text}", flush=True)


def _print_phases(home: str, run: UiRun) -> None:
    for name, seconds in run_phases(home, run):
        print(f"      {name:<48} " + (f"{seconds:6.2f} s" if seconds == seconds else "  (no such event)"), flush=True)
    print(f"      events written: {len(_run_logs(home, run.run_id))}", flush=True)


def cli_wall(root: str, env: dict[str, str], count: int, kind: str, seconds: float) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, os.path.join(root, "run_cli.py"), "--no_record"],
        cwd=root,
        env={**env, "BENCH_COUNT": str(count), "BENCH_KIND": kind, "BENCH_SECONDS": str(seconds)},
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--kinds", nargs="+", default=["sleep", "cpu"], choices=["sleep", "cpu", "watched"])
    parser.add_argument("--seconds", type=float, default=5.0, help="each sleeping step's seconds")
    parser.add_argument("--cpu_seconds", type=float, default=0.1, help="each CPU-light step's loop, roughly")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--phases", action="store_true", help="print each UI run's phases from its event log")
    parser.add_argument("--events", action="store_true", help="print the no-op run's events with their times")
    args = parser.parse_args(argv)
    seconds_of = {"sleep": args.seconds, "watched": args.seconds, "cpu": args.cpu_seconds, "noop": 0.0}
    groups = [(1, "noop", 0.0)] + [(n, k, seconds_of[k]) for k in args.kinds for n in args.counts]
    with tempfile.TemporaryDirectory(prefix="ui-run-bench-") as root:
        with open(os.path.join(root, "benchsteps.py"), "w") as handle:
            handle.write(textwrap.dedent(STEPS_MODULE))
        with open(os.path.join(root, "run_cli.py"), "w") as handle:
            handle.write(CLI)
        with open(os.path.join(root, "location.py"), "w") as handle:
            handle.write(LOCATION)
        with open(os.path.join(root, "workspace.yaml"), "w") as handle:
            handle.write("load_from:\n  - python_file:\n      relative_path: location.py\n      location_name: marin\n")
        home = os.path.join(root, "home")
        # The instance a user's `dagster dev` gets (its run queue and dequeue interval).
        subprocess.run(["bash", os.path.join(REPO_ROOT, "scripts", "dagster_home.sh"), home], check=True)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([root, REPO_ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "DAGSTER_HOME": home,
            "MARIN_PREFIX": os.path.join(root, "prefix"),
            "BENCH_GROUPS": json.dumps(groups),
            "PYTHONUNBUFFERED": "1",
        }
        env.setdefault("MARIN_RAY_TMPDIR", os.path.join("/tmp", f"uib-{os.getpid()}"))
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        with open(os.path.join(root, "dagster_dev.log"), "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "dagster", "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                cwd=root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            _wait_loaded(url, process, args.timeout)
            print(f"UI run vs executor_main, {os.cpu_count()} cores (ui: launchRun -> SUCCESS under dagster dev)")
            fixed = ui_wall(url, 1, "noop")
            fixed_ui = fixed.wall
            fixed_cli = cli_wall(root, env, 1, "noop", 0.0)
            load = os.getloadavg()[0]
            print(
                f"  fixed cost (one no-op step): ui {fixed_ui:5.1f} s  cli {fixed_cli:5.1f} s  "
                f"ui - cli {fixed_ui - fixed_cli:4.1f} s  (load avg {load:.1f})",
                flush=True,
            )
            for job, what in (("plain_default_job", "default executor"), ("plain_in_process_job", "in process")):
                plain = ui_wall(url, 1, "noop", job)
                print(
                    f"  plain Dagster, one no-op @asset ({what}): ui {plain.wall:5.1f} s  ours / plain "
                    f"{fixed_ui / plain.wall:4.2f}  (load avg {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
            if args.events:
                _print_events(home, fixed)
            if args.phases:
                _print_phases(home, fixed)
            for count, kind, seconds in groups[1:]:
                load_before = os.getloadavg()[0]
                cli = cli_wall(root, env, count, kind, seconds)
                run = ui_wall(url, count, kind)
                print(
                    f"  {count:>3} x {kind:<5} ({seconds:g} s): cli {cli:6.1f} s  ui {run.wall:6.1f} s "
                    f"(run itself {run.in_run:5.1f} s)  ratio {run.wall / cli:4.2f} (goal <= 1.1; "
                    f"load avg {load_before:.1f} -> {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
                if args.phases:
                    _print_phases(home, run)
        finally:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
