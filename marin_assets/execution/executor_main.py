"""``executor_main``: the command line of an experiment script (no Dagster import).

Run observers -- e.g. the Dagster bridge, which records command-line runs in the Dagster
instance -- register themselves (:mod:`marin_assets.execution.observers`), so this engine neither
imports nor names Dagster.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
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
from marin_assets.execution.declarations import PartitionSource, describe_source, partition_sources
from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.observers import load_run_observers
from marin_assets.execution.reachability import StoreUnreachableError, check_store
from marin_assets.execution.runner import ExecutionReport, ExecutorError, ExecutorOptions, StepRunner, function_name
from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.status import host_id, write_json
from marin_assets.execution.step import ExecutorStep, InputName
from marin_assets.execution.step_walk import walk_steps
from marin_assets.execution.storage import join_path, local_prefix
from marin_assets.execution.versioning import StepGraph, hash_version
from marin_resources.storage import default_prefix as default_prefix  # re-exported: the one default

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
    path = join_path(base_path or join_path(graph.prefix, "experiments"), f"{script}-{digest}.json")
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


def parse_bool(text: str) -> bool:
    """A draccus-style boolean value (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    value = text.strip().lower()
    if value in {"true", "yes", "y", "1", "on"}:
        return True
    if value in {"false", "no", "n", "0", "off"}:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_list(values: Sequence[str] | None) -> list[str] | None:
    """A list flag as Marin (draccus) reads it: ``"[a, b]"`` is a YAML list.

    Plain values (``--run_only a b``) are items too, so both spellings give the same list.
    """
    if values is None:
        return None
    import yaml

    items: list[str] = []
    for value in values:
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            parsed = yaml.safe_load(text)
            if not isinstance(parsed, list):
                raise ValueError(f"{value!r}: expected a list such as '[name1, name2]'")
            items.extend(str(item) for item in parsed)
        else:
            items.append(value)
    return items


def _flag(default: Any, help: str, **argparse_options: Any) -> Any:
    """A field of :class:`ExecutorMainConfig` with its command-line help (and argparse overrides)."""
    return dataclasses.field(default=default, metadata={"help": help, **argparse_options})


@dataclass(frozen=True)
class ExecutorMainConfig:
    """The options of ``executor_main``, declared once: the command line is generated from these fields
    (:func:`build_parser`), and ``executor_main(ExecutorMainConfig(...), steps)`` passes them as a
    script's own defaults. Marin's fields and defaults first, then ours."""

    prefix: str | None = _flag(None, "root of every output path (default: $MARIN_PREFIX, else ./data)")
    executor_info_base_path: str | None = _flag(
        None, "where experiment records and run logs go (default: <prefix>/experiments)"
    )
    dry_run: bool = _flag(False, "print what would run and why; run nothing")
    force_run_failed: bool = _flag(True, "re-run steps whose status is FAILED (false: refuse them)")
    run_only: list[str] | None = _flag(
        None,
        "run only steps whose name matches one of these regexes (re.search), plus what they need; "
        "'[a, b]' (a YAML list, as draccus reads it) or plain values",
        metavar="REGEX",
    )
    max_concurrent: int | None = _flag(None, "most units running at once (default: every ready unit)")
    # Ours (Marin has none of these).
    partitions: list[str] | None = _flag(
        None, "partition keys per partition set, instead of the declared sources", metavar="SET=k1,k2", nargs="*"
    )
    no_record: bool = _flag(False, "do not record the run in the Dagster instance")
    heartbeat_s: float = _flag(30.0, "seconds between lease heartbeats of a running step")
    stale_s: float = _flag(90.0, "seconds without a heartbeat after which another runner takes a lease over")


def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(ExecutorMainConfig)


def build_parser(description: str | None = None, prog: str | None = None) -> argparse.ArgumentParser:
    """The command line of ``executor_main``, generated from :class:`ExecutorMainConfig`'s fields.

    Parsed as draccus does: one ``--field`` per field, no abbreviations; booleans take a value
    (``--dry_run true``) or none (``--dry_run``); a list takes ``"[a, b]"`` or plain values; ``None``
    defaults stay ``None``. Defaults are not filled in: a flag absent from the command line is absent
    from the namespace, so the caller's values (the dataclass's, or a script's own config) stay.
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description or "Run a Marin experiment",
        allow_abbrev=False,
        argument_default=argparse.SUPPRESS,
    )
    hints = _field_types()
    for field in dataclasses.fields(ExecutorMainConfig):
        kind = hints[field.name]
        base = next((t for t in typing_args(kind) if t is not type(None)), kind)
        options = {k: v for k, v in field.metadata.items() if k != "help"}
        default = field.default
        text = str(field.metadata.get("help", ""))
        text += (
            "" if default is None else f" (default: {str(default).lower() if isinstance(default, bool) else default})"
        )
        if base is bool:
            options = {"nargs": "?", "const": True, "type": parse_bool, "metavar": "true|false", **options}
        elif typing.get_origin(base) is list:
            options = {"nargs": "+", **options}
        else:
            options = {"type": base, **options}
        parser.add_argument(f"--{field.name}", help=text, **options)
    return parser


def typing_args(kind: Any) -> tuple[Any, ...]:
    """The members of a union type (``str | None`` -> ``(str, NoneType)``), else ``(kind,)``."""
    return typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType) else (kind,)


def parse_config(
    argv: Sequence[str] | None, description: str | None = None, base: ExecutorMainConfig | None = None
) -> ExecutorMainConfig:
    """The options of one ``executor_main`` call: ``base`` (default: the dataclass's defaults) with what
    the command line (``argv``, default ``sys.argv[1:]``) names on top.

    Without ``base`` every argument must be ours (an unknown one is an error, as with draccus). A
    script that passes its own config may also have flags of its own: only ours are read, the rest
    are left to it -- so ``executor_main(ExecutorMainConfig(), steps)`` still honours ``--dry_run true``
    and ``--prefix``, as a draccus-wrapped ``main(config)`` that hands its config on does.
    """
    parser = build_parser(description)
    args = list(sys.argv[1:] if argv is None else argv)
    given = vars(parser.parse_args(args) if base is None else parser.parse_known_args(args)[0])
    hints = _field_types()
    for name, value in list(given.items()):
        if any(typing.get_origin(t) is list for t in typing_args(hints[name])):
            try:
                given[name] = parse_list(value)
            except ValueError as exc:
                parser.error(f"--{name} {exc}")
    return dataclasses.replace(base or ExecutorMainConfig(), **given)


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
    concurrency = args.max_concurrent or max_concurrent or max(1, len(StepRunner.units(graph)))
    options = ExecutorOptions(
        force_run_failed=args.force_run_failed,
        max_concurrent=concurrency,
        heartbeat_s=args.heartbeat_s,
        stale_s=args.stale_s,
    )
    # The calling script's path (inspect.stack() would read the source of every frame).
    frame = inspect.currentframe()
    caller = frame.f_back.f_code.co_filename if frame is not None and frame.f_back is not None else sys.argv[0]
    script = os.path.splitext(os.path.basename(caller))[0]
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
