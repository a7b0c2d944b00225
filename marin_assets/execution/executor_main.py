"""``executor_main``: the command line of an experiment script (no Dagster import).

Run observers -- e.g. the Dagster bridge, which records command-line runs in the Dagster
instance -- register themselves (:mod:`marin_assets.execution.observers`), so this engine neither
imports nor names Dagster.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import datetime
import gc
import getpass
import inspect
import json
import logging
import os
import subprocess
import sys
import time
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from marin_assets.execution import run_log
from marin_assets.execution.conditional import UnsupportedStorageError, backend_for
from marin_assets.execution.console import progress_cadence_from_env
from marin_assets.execution.declarations import describe_source, partition_sources
from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.observers import load_run_observers
from marin_assets.execution.outcomes import ExecutionReport, ExecutorError, ExecutorOptions
from marin_assets.execution.reachability import StoreUnreachableError, check_store
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.status import host_id, sweep_stale_temporaries, write_json
from marin_assets.execution.step import ExecutorStep, InputName, PartitionSource
from marin_assets.execution.step_attempt import function_name
from marin_assets.execution.step_walk import walk_steps
from marin_assets.execution.storage import join_path, local_prefix
from marin_assets.execution.units import select_units
from marin_assets.execution.versioning import StepGraph, hash_version
from marin_resources.storage import default_prefix

logger = logging.getLogger("marin.executor")


def resolve_partitions(partitions: Mapping[str, PartitionSource] | None, prefix: str) -> dict[str, list[str]]:
    """Partition keys per partition set; a callable source is called with the prefix."""
    resolved: dict[str, list[str]] = {}
    for name, source in (partitions or {}).items():
        resolved[name] = list(source(prefix) if callable(source) else source)
    return resolved


def _plain_steps(steps: Sequence[ExecutorStep | InputName]) -> list[ExecutorStep]:
    """The steps of a Marin step list (an ``InputName`` stands for its step)."""
    return [s.step if isinstance(s, InputName) else s for s in steps if not isinstance(s, InputName) or s.step]


def _git_commit(cwd: str) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def write_experiment_record(
    graph: StepGraph, description: str | None, caller_path: str, run_id: str, base_path: str | None = None
) -> str:
    """Write ``<base_path>/<script>-<hash>.json`` (default ``<prefix>/experiments``) and return its path."""
    nodes = graph.topological()
    steps = [
        {
            "name": n.name,
            "fn_name": function_name(n.step.fn),
            "output_path": n.output_path,
            "hash": n.hash,
            "version": redact_secrets(n.version),
            "description": n.step.description,
            "override_output_path": n.step.override_output_path,
            "dependencies": [d.output_path for d in n.dependencies],
            "partitioned_by": n.partitioned_by,
        }
        for n in nodes
    ]
    digest = hash_version({"steps": [s["output_path"] for s in steps]})
    script = os.path.splitext(os.path.basename(caller_path))[0] or "experiment"
    folder = base_path or join_path(graph.prefix, "experiments")
    path = join_path(folder, f"{script}-{digest}.json")
    # A writer killed inside its atomic write left a hidden .tmp-* file: readers skip it, this removes it.
    sweep_stale_temporaries(folder)
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


@dataclass(frozen=True)
class ExecutorMainConfig:
    """The flags of an experiment script (Marin's first, then ours); a script's own instance gives the defaults."""

    # Declared once: draccus reads the command line into these fields (parse_config), its help is
    # the docstring under each field, and executor_main(ExecutorMainConfig(...), steps) passes them
    # as a script's own defaults.

    prefix: str | None = None
    """Root of every output path (None: $MARIN_PREFIX, else ./data)."""
    executor_info_base_path: str | None = None
    """Where experiment records and run logs go (None: <prefix>/experiments)."""
    dry_run: bool = False
    """Print what would run and why; run nothing."""
    force_run_failed: bool = True
    """Re-run steps whose status is FAILED (false: refuse them)."""
    run_only: list[str] | None = None
    """Run only steps whose name matches one of these regexes (re.search), plus what they need: "[a, b]"."""
    max_concurrent: int | None = None
    """Most units running at once (None: every ready unit)."""
    # Ours (Marin has none of these).
    partitions: list[str] | None = None
    """Partition keys per partition set, instead of the declared sources: "[SET=k1,k2, SET2=k3]"."""
    no_record: bool = False
    """Do not record the run in the Dagster instance."""
    heartbeat_s: float = 30.0
    """Seconds between lease heartbeats of a running step."""
    stale_s: float = 90.0
    """Seconds without a heartbeat after which another runner takes a lease over."""


_HELP_FLAGS = ("-h", "--help")
_SHORTER_FORMS = (
    "Booleans also take no value (--dry_run is --dry_run true); a list also takes plain values "
    '(--run_only a b is --run_only "[a, b]").'
)


def _field_kinds() -> dict[str, str]:
    """``bool``, ``list`` or ``value`` per field of :class:`ExecutorMainConfig`."""
    kinds = {}
    for name, hint in typing.get_type_hints(ExecutorMainConfig).items():
        members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        base = next((t for t in members if t is not type(None)), hint)
        kinds[name] = "bool" if base is bool else "list" if typing.get_origin(base) is list else "value"
    return kinds


def draccus_arguments(argv: Sequence[str], keep_unknown: bool = True) -> tuple[list[str], set[str]]:
    """``argv`` as draccus reads it, and the fields it names.

    Draccus wants a value after every flag and a list as one YAML value; the shorter forms this
    project's docs and scripts use are rewritten to those: ``--dry_run`` alone is ``--dry_run true``,
    ``--run_only a b`` is ``--run_only '["a", "b"]'``. With ``keep_unknown`` false, flags that are not
    ours (a script's own, with their values) are left out, for the script's own parser.
    """
    kinds = _field_kinds()
    out: list[str] = []
    named: set[str] = set()
    index = 0
    while index < len(argv):
        token = argv[index]
        index += 1
        if token in _HELP_FLAGS:
            out.append(token)
            continue
        name, eq, inline = token[2:].partition("=") if token.startswith("--") else ("", "", "")
        values = [inline] if eq else []
        while not eq and index < len(argv) and not argv[index].startswith("--"):
            values.append(argv[index])
            index += 1
        if name not in kinds and name != "config_path":
            if keep_unknown:
                out += [token, *values]
            continue
        named.add(name)
        if kinds.get(name) == "bool" and not values:
            values = ["true"]
        elif kinds.get(name) == "list" and values and not (len(values) == 1 and values[0].lstrip().startswith("[")):
            values = [json.dumps(values)]  # a YAML flow list; quoted, so "SET=k1,k2" stays one item
        out += [f"--{name}", *values]
    return out, named


def build_parser(description: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``executor_main`` as draccus builds it from :class:`ExecutorMainConfig` (for help)."""
    from draccus.argparsing import ArgumentParser

    parser = ArgumentParser(
        ExecutorMainConfig, prog=prog, description=description or "Run a Marin experiment", epilog=_SHORTER_FORMS
    ).parser
    for action in parser._actions:  # booleans as they are typed on the command line: (default: true)
        if isinstance(action.default, bool):
            action.default = str(action.default).lower()
    return parser


def parse_config(
    argv: Sequence[str] | None, description: str | None = None, base: ExecutorMainConfig | None = None
) -> ExecutorMainConfig:
    """The options of one ``executor_main`` call, parsed by draccus (Marin's parser): ``base``
    (default: the dataclass's defaults) with what the command line (``argv``, default
    ``sys.argv[1:]``) names on top.

    Without ``base`` every argument must be ours (an unknown one is an error, as with draccus). A
    script that passes its own config may also have flags of its own: only ours are read, the rest
    are left to it -- so ``executor_main(ExecutorMainConfig(), steps)`` still honours ``--dry_run true``
    and ``--prefix``, as a draccus-wrapped ``main(config)`` that hands its config on does.
    """
    from draccus.argparsing import ArgumentParser
    from draccus.utils import ParsingError

    args, named = draccus_arguments(list(sys.argv[1:] if argv is None else argv), keep_unknown=base is None)
    parser = ArgumentParser(
        ExecutorMainConfig, description=description or "Run a Marin experiment", epilog=_SHORTER_FORMS
    )
    try:
        parsed = parser.parse_args(args)
    except ParsingError as exc:  # a value draccus cannot decode (``--dry_run maybe``): a usage error
        parser.parser.error(str(exc))
    if base is None:
        return parsed
    if "config_path" in named:  # draccus's config file: the fields it sets override the script's too
        import yaml

        path = args[args.index("--config_path") + 1]
        with open(path, encoding="utf-8") as handle:
            named |= set(yaml.safe_load(handle) or {})
    return dataclasses.replace(base, **{name: getattr(parsed, name) for name in named if name != "config_path"})


def _call_arguments(
    args: tuple[Any, ...], steps: Any, description: str | None
) -> tuple[ExecutorMainConfig | None, Sequence[ExecutorStep | InputName], str | None]:
    """Marin's calling forms (draccus.wrap): ``(steps, description)`` or ``(config, steps, description)``,
    positionally or by keyword."""
    rest = list(args)
    config = rest.pop(0) if rest and isinstance(rest[0], ExecutorMainConfig) else None
    for name in ("steps", "description"):
        if not rest:
            break
        if (steps if name == "steps" else description) is not None:
            raise TypeError(f"executor_main() got multiple values for argument {name!r}")
        if name == "steps":
            steps = rest.pop(0)
        else:
            description = rest.pop(0)
    if rest:
        raise TypeError(f"executor_main() got {len(rest)} unexpected positional argument(s)")
    if steps is None:
        raise TypeError("executor_main() needs the steps to run")
    return config, steps, description


_exit_collection_registered = False


def _collect_once_at_exit() -> None:
    """At interpreter exit, collect garbage once (finalizers run) and freeze what is left.

    A script that imports Levanter holds ~600,000 tracked objects (torch, jax, transformers...);
    Python's shutdown clears module after module and rescans that heap each time, ~1.5 s of a
    cached re-run that takes ~6 s in all (bench/cached_rerun.py). One collection here (~0.3 s) runs
    the finalizers of what is garbage; the frozen rest is still released as modules are cleared,
    but no longer rescanned. Registered late, it runs before the handlers of the libraries
    imported earlier (atexit runs last-registered first); what those create is collected as usual.
    """
    global _exit_collection_registered
    if not _exit_collection_registered:
        _exit_collection_registered = True
        atexit.register(_collect_and_freeze)


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


def executor_main(
    *positional: Any,
    steps: Sequence[ExecutorStep | InputName] | None = None,
    description: str | None = None,
    argv: Sequence[str] | None = None,
    partitions: Mapping[str, PartitionSource] | None = None,
    max_concurrent: int | None = None,
) -> ExecutionReport | None:
    """Run ``steps`` from the command line (``--prefix``, ``--dry_run true``, ``--run_only`` ...).

    Called as Marin's ``executor_main`` is: ``executor_main(steps=..., description=...)``,
    ``executor_main(steps, description)``, or with an :class:`ExecutorMainConfig` first
    (``executor_main(ExecutorMainConfig(prefix=...), steps)``), whose values are then the defaults
    that the command line's own flags override (:func:`parse_config`). ``argv`` parses these
    arguments instead of ``sys.argv[1:]``.
    ``max_concurrent`` is the default for ``--max_concurrent`` (Marin's keyword). Returns the
    execution report (None for a dry run); exits with status 1 when steps fail and 2 when the steps
    succeeded but the run could not be recorded in the Dagster instance (unless ``--no_record``).
    """
    config, steps, description = _call_arguments(positional, steps, description)
    args = parse_config(argv, description, config)
    _collect_once_at_exit()
    console = run_log.configure_console()
    prefix = local_prefix(args.prefix or default_prefix())
    try:
        backend_for(prefix)  # leases need conditional writes: refuse such a prefix once, up front
    except UnsupportedStorageError as exc:
        logger.error("%s", exc)
        raise SystemExit(2) from None
    try:  # a store that cannot be reached: one line in seconds, not a minute of client retries
        check_store(prefix, sorted(s.name for s in walk_steps(_plain_steps(steps))))
    except StoreUnreachableError as exc:
        logger.error("%s", exc)
        raise SystemExit(1) from None
    given: dict[str, PartitionSource] = dict(partitions or {})
    for item in args.partitions or []:
        name, _, keys = item.partition("=")
        given[name] = [k for k in keys.split(",") if k]
    try:  # a partition set nobody gave keys for: the source its steps declare
        sources = partition_sources(_plain_steps(steps), given)
    except ValueError as exc:
        logger.error("%s", exc)
        raise SystemExit(2) from None
    part_keys = resolve_partitions(sources, prefix)
    for name in sources.keys() - given.keys():
        logger.info("partition set %r: %d key(s) from %s", name, len(part_keys[name]), describe_source(sources[name]))
        if not part_keys[name]:
            logger.warning(
                "partition set %r is empty (%s): its steps run nothing", name, describe_source(sources[name])
            )
    graph = StepGraph(steps, prefix, part_keys)
    if args.dry_run:
        print(format_plan(plan(graph, args.run_only, args.force_run_failed)))
        return None
    concurrency = args.max_concurrent or max_concurrent or max(1, len(select_units(graph)))
    # The calling script's path (inspect.stack() would read the source of every frame).
    frame = inspect.currentframe()
    caller = frame.f_back.f_code.co_filename if frame is not None and frame.f_back is not None else sys.argv[0]
    script = os.path.splitext(os.path.basename(caller))[0]
    try:
        console_progress = progress_cadence_from_env()
    except ValueError as exc:
        logger.error("%s", exc)
        raise SystemExit(2) from None
    options = ExecutorOptions(
        force_run_failed=args.force_run_failed,
        max_concurrent=concurrency,
        heartbeat_s=args.heartbeat_s,
        stale_s=args.stale_s,
        description=f"executor_main {script}",
        listeners=(console_progress,),  # the units' lines and progress lines on the console
    )
    info_base = args.executor_info_base_path or join_path(prefix, "experiments")
    # Steps that keep shared files under the run's prefix (the hub mirror of tokenizers and eval
    # data, marin_assets.download.huggingface.hub) read it from $MARIN_PREFIX while the run lasts.
    previous_prefix = os.environ.get("MARIN_PREFIX")
    os.environ["MARIN_PREFIX"] = prefix
    try:
        with run_log.run_log(run_log.log_path(info_base, script, options.run_id), console) as log:
            return _run_and_record(graph, args, options, description, caller, log)
    finally:
        if previous_prefix is None:
            os.environ.pop("MARIN_PREFIX", None)
        else:
            os.environ["MARIN_PREFIX"] = previous_prefix


def _run_and_record(
    graph: StepGraph,
    args: ExecutorMainConfig,
    options: ExecutorOptions,
    description: str | None,
    caller: str,
    log: run_log.RunLog,
) -> ExecutionReport:
    """Run the graph, record it in the Dagster instance (its output into the run's log file only),
    and report: a failed run ends with one line per failed step and the log file's path."""
    prefix = graph.prefix
    try:
        record = write_experiment_record(graph, description, caller, options.run_id, args.executor_info_base_path)
    except OSError as exc:  # a full disk, a read-only folder: before any step, in one line
        logger.error(
            "cannot write the experiment record under %s on host %s: %s; no step started", prefix, host_id(), exc
        )
        raise SystemExit(1) from None
    logger.info("experiment record: %s", record)
    error: ExecutorError | None = None
    started = time.time()
    try:
        report = StepRunner(options).run(graph, args.run_only)
    except ExecutorError as exc:
        error = exc
        report = None
    ended = time.time()
    recording_failed = False
    if not args.no_record:
        try:
            observers = load_run_observers()
        except ImportError as exc:
            logger.error("%s -- the run is not recorded; pass --no_record to run without recording", exc)
            observers, recording_failed = [], True
        for observer in observers:
            try:
                with log.quiet():
                    observer(
                        graph=graph,
                        run_id=options.run_id,
                        run_only=args.run_only,
                        description=description,
                        caller=caller,
                        # Every unit's outcome (its seconds, ran/cached/waited/failed), also of a failed run.
                        report=report if error is None else error.report,
                        # When the steps ran (a recording's run lasts as long as they did).
                        started=started,
                        ended=ended,
                    )
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
        log.write_failures(error.failed)
        logger.error("%s\nfull tracebacks and the run's log: %s", error, log.path)
        raise SystemExit(1)
    if recording_failed:
        raise SystemExit(2)
    assert report is not None
    summary = {a: len(report.by_action(a)) for a in ("ran", "cached", "waited")}
    print(json.dumps({"run_id": report.run_id, "prefix": prefix, **summary, "experiment_record": record}))
    return report
