"""``executor_main``: the command line of an experiment script (no Dagster import).

Run observers -- e.g. the Dagster bridge, which records command-line runs in the Dagster
instance -- are loaded by name from ``$MARIN_RUN_OBSERVERS`` (``module:callable``, comma
separated), so this engine never imports Dagster itself.
"""

from __future__ import annotations

import argparse
import datetime
import getpass
import importlib
import inspect
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.runner import ExecutionReport, Executor, ExecutorError, ExecutorOptions
from marin_assets.execution.status import write_json
from marin_assets.execution.step import ExecutorStep
from marin_assets.execution.storage import join_path
from marin_assets.execution.versioning import StepGraph, hash_version

logger = logging.getLogger("marin.executor")

DEFAULT_PREFIX = "./data"
DEFAULT_OBSERVERS = "marin_assets.dagster_bridge.recording:record_cli_run"

PartitionSource = Sequence[str] | Callable[[str], Sequence[str]]


def default_prefix() -> str:
    """``$MARIN_PREFIX`` or ``./data``, as an absolute path for local folders."""
    prefix = os.environ.get("MARIN_PREFIX") or DEFAULT_PREFIX
    return prefix if "://" in prefix else os.path.abspath(prefix)


def resolve_partitions(partitions: Mapping[str, PartitionSource] | None, prefix: str) -> dict[str, list[str]]:
    """Partition keys per partition set; a callable source is called with the prefix."""
    resolved: dict[str, list[str]] = {}
    for name, source in (partitions or {}).items():
        resolved[name] = list(source(prefix) if callable(source) else source)
    return resolved


def _git_commit(cwd: str) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def write_experiment_record(graph: StepGraph, description: str | None, caller_path: str, run_id: str) -> str:
    """Write ``<prefix>/experiments/<script>-<hash>.json`` and return its path."""
    nodes = graph.topological()
    steps = [
        {
            "name": n.name,
            "output_path": n.output_path,
            "hash": n.hash,
            "version": n.version,
            "description": n.step.description,
            "partitioned_by": n.partitioned_by,
        }
        for n in nodes
    ]
    digest = hash_version({"steps": [s["output_path"] for s in steps]})
    script = os.path.splitext(os.path.basename(caller_path))[0] or "experiment"
    path = join_path(graph.prefix, f"experiments/{script}-{digest}.json")
    write_json(
        path,
        {
            "description": description,
            "caller_path": caller_path,
            "git_commit": _git_commit(os.path.dirname(os.path.abspath(caller_path)) or "."),
            "user": getpass.getuser(),
            "created_date": datetime.datetime.now(datetime.UTC).isoformat(),
            "prefix": graph.prefix,
            "run_id": run_id,
            "partitions": graph.partitions,
            "steps": steps,
        },
    )
    return path


def _load_observers() -> list[Callable[..., Any]]:
    spec = os.environ.get("MARIN_RUN_OBSERVERS", DEFAULT_OBSERVERS)
    observers = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        module_name, _, attr = item.partition(":")
        try:
            observers.append(getattr(importlib.import_module(module_name), attr))
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"run observer {item} unavailable: {exc}") from exc
    return observers


def build_parser(description: str | None) -> argparse.ArgumentParser:
    """The command-line options of ``executor_main``."""
    parser = argparse.ArgumentParser(description=description or "Run a Marin experiment")
    parser.add_argument("--prefix", default=None, help="output root (default: $MARIN_PREFIX or ./data)")
    parser.add_argument("--dry_run", action="store_true", help="print what would run and why; run nothing")
    parser.add_argument("--force_run_failed", action="store_true", help="re-run steps whose status is FAILED")
    parser.add_argument(
        "--run_only", nargs="+", default=None, metavar="REGEX", help="only steps matching a regex, plus what they need"
    )
    parser.add_argument("--max_concurrent", type=int, default=4)
    parser.add_argument(
        "--partitions", nargs="*", default=None, metavar="SET=k1,k2", help="partition keys (override discovery)"
    )
    parser.add_argument("--no_record", action="store_true", help="do not record the run in the Dagster instance")
    parser.add_argument("--heartbeat_s", type=float, default=30.0)
    parser.add_argument("--stale_s", type=float, default=90.0)
    return parser


def executor_main(
    steps: Sequence[ExecutorStep],
    description: str | None = None,
    argv: Sequence[str] | None = None,
    partitions: Mapping[str, PartitionSource] | None = None,
) -> ExecutionReport | None:
    """Run ``steps`` from the command line (``--prefix``, ``--dry_run``, ``--run_only`` ...).

    Returns the execution report (None for a dry run); exits with status 1 when steps fail and 2
    when the steps succeeded but the run could not be recorded in the Dagster instance (unless
    ``--no_record``).
    """
    args = build_parser(description).parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    prefix = args.prefix or default_prefix()
    if "://" not in prefix:
        prefix = os.path.abspath(prefix)
    part_keys = resolve_partitions(partitions, prefix)
    for item in args.partitions or []:
        name, _, keys = item.partition("=")
        part_keys[name] = [k for k in keys.split(",") if k]
    graph = StepGraph(steps, prefix, part_keys)
    if args.dry_run:
        print(format_plan(plan(graph, args.run_only, args.force_run_failed)))
        return None
    options = ExecutorOptions(
        force_run_failed=args.force_run_failed,
        max_concurrent=args.max_concurrent,
        heartbeat_s=args.heartbeat_s,
        stale_s=args.stale_s,
    )
    # The calling script's path (inspect.stack() would read the source of every frame).
    frame = inspect.currentframe()
    caller = frame.f_back.f_code.co_filename if frame is not None and frame.f_back is not None else sys.argv[0]
    record = write_experiment_record(graph, description, caller, options.run_id)
    logger.info("experiment record: %s", record)
    error: ExecutorError | None = None
    try:
        report = Executor(options).run(graph, args.run_only)
    except ExecutorError as exc:
        error = exc
        report = None
    recording_failed = False
    if not args.no_record:
        try:
            observers = _load_observers()
        except ImportError as exc:
            logger.error("%s -- the run is not recorded; pass --no_record to run without recording", exc)
            observers, recording_failed = [], True
        for observer in observers:
            try:
                observer(graph=graph, run_id=options.run_id, run_only=args.run_only, description=description)
            except Exception as exc:  # noqa: BLE001 - reported below; the step outputs stay valid
                # A run the instance does not know about is invisible in the UI and its lineage is
                # lost: that is a failure of this command (the outputs are written, so a re-run is
                # cached and only records), unless the user opted out with --no_record.
                logger.error(
                    "could not record the run in the Dagster instance (%s): %s: %s -- the step outputs are "
                    "written; fix the instance and re-run (everything is cached), or pass --no_record",
                    getattr(observer, "__name__", observer),
                    type(exc).__name__,
                    exc,
                )
                recording_failed = True
    if error is not None:
        logger.error("%s", error)
        raise SystemExit(1)
    if recording_failed:
        raise SystemExit(2)
    assert report is not None
    summary = {a: len(report.by_action(a)) for a in ("ran", "cached", "waited")}
    print(json.dumps({"run_id": report.run_id, "prefix": prefix, **summary, "experiment_record": record}))
    return report
