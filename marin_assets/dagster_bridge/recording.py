"""Record a command-line (``executor_main``) run in the Dagster instance, as it happened.

``executor_main`` computes the steps itself (with its own concurrency); afterwards this observer
writes what happened into the instance as ONE Dagster run per invocation (job
``executor_main__<script>``, tags ``marin/source=executor_main`` and ``marin/run_id=<engine run id>``).
Nothing is computed again: the run's single op reports, in the order the units finished,

* one materialization per unit that is SUCCESS -- of every partition too -- with the step's real
  seconds (``marin/seconds``, from the engine's report), ``marin/action`` ``ran (executor_main)``,
  ``cached`` or ``waited`` (then ``marin/computed_by_run`` names the run that did the work), and the
  data and code versions Dagster's staleness reads (as a UI materialization records them);
* the progress lines each computed step recorded (Levanter metric records and lm-eval result rows
  in the ``*.log`` files of its output, read with the same parser as the live channel);
* a failure naming each failed step with its cause first, so the run fails as the command did.

Only public Dagster API is used: a job executed in process on the instance, ``context.log_event``,
``DagsterInstance.fetch_materializations`` / ``fetch_observations`` / ``report_runless_asset_event``.
The Dagster run is written when the command ends; its start and end times are then set to when the
steps ran (``executor_main`` passes them), so its *Duration* is the command's, not the recording's.
The engine's timings are in each materialization and in the log lines.

The assets are keyed as the code location keys them (its discovered experiment scripts, see
``execution/discovery.py``): a step the location defines (same name and code version) is recorded
on that defined asset, with its lineage and group. A step it does not define (a script the
location does not list, a ``--size`` it does not show, an edit not reloaded yet) is recorded on a
key without a definition, and the recording says so: a warning naming the steps and the run tag
``marin/undefined_steps``.

Recording happens only when ``$DAGSTER_HOME`` is set (the README's commands set it), because
without it Dagster would use a throwaway instance.

Importing this module registers :func:`record_cli_run` as a run observer of ``executor_main``
(:mod:`marin_assets.execution.observers`); the package declares the module as an observer plugin
(``pyproject.toml``), so ``executor_main`` imports it after the steps ran.
"""

import datetime
import json
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from marin_assets.browse.links import browser_url
from marin_assets.dagster_bridge.dagster_internals import DATA_VERSION_TAG, set_run_times
from marin_assets.dagster_bridge.location_graph import AssetKeys, location_asset_keys, location_graphs
from marin_assets.dagster_bridge.metadata import to_dagster_metadata, uri_metadata
from marin_assets.dagster_bridge.partition_sets import observation, partition_set_key, partition_set_version
from marin_assets.dagster_bridge.step_run import RUN_ID_TAG
from marin_assets.dagster_bridge.unit_run import (
    CLI_RECORDING_SOURCE,
    SOURCE_TAG,
    code_version_of,
    unit_label,
    version_tags,
)
from marin_assets.execution.discovery import ENV_VAR, Script, discover, project_root, script_of_file
from marin_assets.execution.observers import register_run_observer
from marin_assets.execution.outcomes import ExecutionReport, StepOutcome
from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.status import (
    STATUS_DEP_FAILED,
    STATUS_FAILED,
    STATUS_SUCCESS,
    StatusRecord,
    read_metadata,
    read_statuses,
)
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.execution.units import Unit, select_units
from marin_assets.execution.versioning import ResolvedStep, StepGraph, version_json
from marin_assets.training.subprocess_runner import progress_of

logger = logging.getLogger("marin.executor")
UNDEFINED_TAG = "marin/undefined_steps"
SCRIPT_TAG = "marin/script"
OBSERVER_NAME = "dagster"
"""The name this module registers its run observer under."""
MAX_PROGRESS_LINES = 200
"""Progress lines recorded per step at most (evenly spaced, the last one always): each is an event."""

_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]")


def location_keys(prefix: str, scripts: Sequence[Script]) -> AssetKeys:
    """The code location's asset keys (the same naming as ``definitions.build_definitions``)."""
    experiments = [s.experiment for s in scripts if s.experiment is not None]
    # A script whose steps do not resolve is an error group in the location: it defines nothing.
    graphs = [None if isinstance(g, Exception) else g for g in location_graphs(experiments, prefix)]
    return location_asset_keys(experiments, graphs, scripts, warn=False)  # the location warns, not each run


def _latest_data_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[str | None, int | None]:
    """(data version, storage id) of the latest materialization of ``key``, else of its latest
    observation (a partition set); (None, None) when the instance holds neither."""
    for fetch in (instance.fetch_materializations, instance.fetch_observations):
        records = fetch(key, limit=1).records
        if records:
            record = records[0]
            return (record.event_log_entry.tags or {}).get(DATA_VERSION_TAG), record.storage_id
    return None, None


def observe_partition_sets(instance: dg.DagsterInstance, nodes: Sequence[ResolvedStep]) -> None:
    """Observe the partition sets the recorded steps read every partition of, before recording them.

    A materialization stores the data version its inputs had when it ran; the drop set's is its
    latest observation. Without one the recorded training would read "no version", and the first
    observation of the drop set (the ``partition_sets`` sensor, seconds later) would mark the
    model *Upstream data* changed although nothing changed.
    """
    names = sorted({d.partitioned_by for n in nodes for d in n.all_partition_inputs if d.partitioned_by})
    for name in names:
        keys = sorted(instance.get_dynamic_partitions(name))
        version, _ = _latest_data_version(instance, partition_set_key(name))
        if version == partition_set_version(keys):
            continue
        instance.report_runless_asset_event(observation(name, keys))


def _outside_project(caller: str) -> bool:
    return os.path.relpath(os.path.abspath(caller), project_root()).startswith("..")


def how_to_list(caller: str | None) -> str:
    """How to make the code location show the script ``caller`` (a hint for the "not listed" warning)."""
    root = project_root()
    pyproject = os.path.join(root, "pyproject.toml")
    if caller:
        path = os.path.abspath(caller)
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return (
                f'to show it with lineage, add "{rel}" (or a glob such as "{os.path.dirname(rel) or "."}/*.py") to '
                f"[tool.marin] experiments in {pyproject}, or set {ENV_VAR}={rel}"
            )
        return (
            f"to show it with lineage, set {ENV_VAR}={path} for the code location "
            f"(or list it in [tool.marin] experiments of {pyproject})"
        )
    return f"to show it with lineage, list the script in [tool.marin] experiments of {pyproject} or in {ENV_VAR}"


def step_progress_lines(output_path: str, label: str) -> list[str]:
    """The progress lines ``label``'s step recorded: every progress record (see
    :func:`~marin_assets.training.subprocess_runner.progress_of`) of the ``*.log`` files in its
    output folder (``train.log``, ``lm_eval.log``, ``levanter_eval.log``), at most
    :data:`MAX_PROGRESS_LINES`, each as ``<step>: <log>: <progress>``."""
    fs, path = filesystem(output_path)
    try:
        logs = sorted(p for p in fs.glob(join_path(path, "*.log")) if fs.isfile(p))
    except FileNotFoundError:
        return []
    lines: list[str] = []
    for log in logs:
        source = os.path.splitext(log.rstrip("/").rsplit("/", 1)[-1])[0]
        with fs.open(log, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
        progress = [p for p in (progress_of(line) for line in text.splitlines()) if p is not None]
        if len(progress) > MAX_PROGRESS_LINES:
            step = len(progress) / MAX_PROGRESS_LINES
            kept = [progress[int(i * step)] for i in range(MAX_PROGRESS_LINES - 1)] + [progress[-1]]
            lines.append(f"{label}: {source}: {len(kept)} of {len(progress)} progress lines (all in {log})")
            progress = kept
        lines.extend(f"{label}: {source}: {p}" for p in progress)
    return lines


@dataclass
class UnitRecord:
    """What happened to one unit of the command-line run, as the recording reports it."""

    node: ResolvedStep
    partition: str | None
    key: dg.AssetKey
    action: str  # the engine's: ran | cached | waited | failed | dep_failed | abandoned | not run
    seconds: float
    status: StatusRecord | None
    error: str | None = None
    progress: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return unit_label((self.node, self.partition))

    @property
    def output_path(self) -> str:
        return self.node.partition_output_path(self.partition)

    @property
    def succeeded(self) -> bool:
        return self.status is not None and self.status.status == STATUS_SUCCESS


def _failed_here(status: StatusRecord | None, run_id: str) -> bool:
    return status is not None and status.status == STATUS_FAILED and status.run_id == run_id


def _action_from_status(status: StatusRecord | None, run_id: str) -> str:
    """The unit's action when the engine's report does not hold it (read from its status file)."""
    if status is None:
        return "not run"
    if status.status == STATUS_SUCCESS:
        return "ran" if status.run_id == run_id else "cached"
    if _failed_here(status, run_id):
        return "failed"
    if status.status == STATUS_DEP_FAILED:
        return "dep_failed"
    return "not run"


def unit_records(
    graph: StepGraph, units: Sequence[Unit], keys: AssetKeys, run_id: str, report: ExecutionReport | None
) -> list[UnitRecord]:
    """One record per unit, in the order the engine finished them (units it did not report last)."""
    outcomes: dict[tuple[str, str | None], StepOutcome] = {}
    order: dict[tuple[str, str | None], int] = {}
    for index, outcome in enumerate(report.outcomes if report is not None else []):
        outcomes[(outcome.output_path, outcome.partition)] = outcome
        order[(outcome.output_path, outcome.partition)] = index
    records = []
    statuses = read_statuses([node.partition_output_path(partition) for node, partition in units])  # one batch
    for node, partition in units:
        output_path = node.partition_output_path(partition)
        status = statuses.get(output_path)
        outcome = outcomes.get((output_path, partition))
        action = outcome.action if outcome is not None else _action_from_status(status, run_id)
        record = UnitRecord(
            node,
            partition,
            keys.key_for(node),
            action,
            outcome.seconds if outcome is not None else 0.0,
            status,
            # The traceback this run recorded (its last line is the cause) before the engine's
            # one-line summary (which says why an earlier FAILED attempt was not re-run).
            error=(status.error if _failed_here(status, run_id) else None) or (outcome.error if outcome else None),
        )
        if action == "ran":
            record.progress = step_progress_lines(output_path, record.label)
        records.append(record)
    records.sort(key=lambda r: order.get((r.output_path, r.partition), len(order)))
    return records


def _input_keys(node: ResolvedStep, keys: AssetKeys) -> list[dg.AssetKey]:
    """The asset keys a step's asset depends on, as the location declares them."""
    inputs = [keys.key_for(d) for d in (*node.dependencies, *node.pseudo_dependencies)]
    sets = sorted({d.partitioned_by for d in node.all_partition_inputs if d.partitioned_by is not None})
    return inputs + [partition_set_key(name) for name in sets]


def materialization_of(
    record: UnitRecord, prefix: str, run_id: str, inputs: dict[dg.AssetKey, tuple[str | None, int | None]]
) -> dg.AssetMaterialization:
    """The materialization of a SUCCESS unit: what a UI materialization records, with the command
    line's action, seconds and (``waited``) the run that computed it."""
    node = record.node
    computed_here = record.action == "ran"
    computed_by = record.status.run_id if record.status is not None else None
    if computed_here:
        action, reason = "ran (executor_main)", f"computed by command-line run {run_id}"
    elif record.action == "waited":
        action, reason = "waited", f"computed by run {computed_by} while this run waited for it"
    else:
        action, reason = "cached", "cached"
    metadata = to_dagster_metadata(read_metadata(record.output_path))
    metadata.update(
        {
            "dagster/uri": uri_metadata(record.output_path),
            "marin/cached": dg.MetadataValue.bool(not computed_here),
            "marin/action": dg.MetadataValue.text(action),
            "marin/reason": dg.MetadataValue.text(reason),
            "marin/hash": dg.MetadataValue.text(node.hash),
            "marin/code_version": dg.MetadataValue.text(code_version_of(node)),
            "marin/version": dg.MetadataValue.json(redact_secrets(json.loads(version_json(node.version)))),
            "marin/seconds": dg.MetadataValue.float(round(record.seconds, 3)),
        }
    )
    if computed_by:
        metadata["marin/computed_by_run"] = dg.MetadataValue.text(computed_by)
    url = browser_url(record.output_path, prefix)
    if url:
        metadata["marin/browser"] = dg.MetadataValue.url(url)
    return dg.AssetMaterialization(
        asset_key=record.key, partition=record.partition, metadata=metadata, tags=version_tags(node, inputs)
    )


def _cause(record: UnitRecord, failed: Sequence[UnitRecord]) -> str:
    """The cause of a failed unit, first: its error's last line, or which input failed."""
    if record.action == "dep_failed":
        inputs = {id(d) for d in record.node.dependencies}
        names = sorted({r.label for r in failed if id(r.node) in inputs})
        return f"not run: its input {', '.join(names) or '(outside this run)'} failed"
    lines = [line.strip() for line in (record.error or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else "failed (no error recorded)"


def _when(status: StatusRecord | None) -> str:
    if status is None or not status.time:
        return ""
    return f" at {datetime.datetime.fromtimestamp(status.time).isoformat(timespec='seconds')}"


def recording_job(
    name: str, records: Sequence[UnitRecord], keys: AssetKeys, prefix: str, run_id: str, instance: dg.DagsterInstance
) -> dg.JobDefinition:
    """The one-op job whose run is the record of the command-line run ``run_id``."""
    failed = [r for r in records if r.action in ("failed", "dep_failed")]

    @dg.op(name="executor_main", out={}, description=f"What command-line run {run_id} did (recorded, not recomputed)")
    def report_units(context: dg.OpExecutionContext) -> Iterator[dg.AssetMaterialization]:
        for record in records:
            for line in record.progress:
                context.log.info(line)
            if record.action == "ran":
                context.log.info(f"{record.label}: ran in {record.seconds:.1f}s{_when(record.status)}")
            if record.action in ("ran", "cached", "waited") and record.succeeded:
                # The inputs' latest records: the ones this run recorded before are stored by now
                # (an event the op yields is written before the op resumes).
                inputs = {key: _latest_data_version(instance, key) for key in _input_keys(record.node, keys)}
                yield materialization_of(record, prefix, run_id, inputs)
        if failed:
            causes = [f"{r.label}: {_cause(r, failed)}  [output {r.output_path}]" for r in failed]
            raise dg.Failure(
                description=f"{len(failed)} step(s) failed in command-line run {run_id}:\n" + "\n".join(causes),
                metadata={"marin/failed": dg.MetadataValue.json([r.label for r in failed])},
                allow_retries=False,
            )

    @dg.job(name=name, description="A command-line (executor_main) run, recorded when it ended")
    def record() -> None:
        report_units()

    return record


def record_cli_run(
    graph: StepGraph,
    run_id: str,
    run_only: Sequence[str] | None = None,
    description: str | None = None,
    caller: str | None = None,
    scripts: Sequence[Script] | None = None,
    report: ExecutionReport | None = None,
    started: float | None = None,
    ended: float | None = None,
    **_: Any,
) -> list[str]:
    """Record the command-line run in the Dagster instance as one run; returns its Dagster run id
    (in a list; empty when ``$DAGSTER_HOME`` is not set).

    ``caller`` is the script's file (to name the run); ``scripts`` the location's scripts
    (default: discovered as the code location does); ``report`` the engine's outcomes (without
    it, each unit's action is read from its status file and its seconds are unknown); ``started``
    and ``ended`` when the steps ran (the recorded run's start and end, its *Duration* in the UI;
    without them, the recording's own).
    """
    if not os.environ.get("DAGSTER_HOME"):
        logger.info("DAGSTER_HOME is not set: not recording this run in a Dagster instance")
        return []
    instance = dg.DagsterInstance.get()
    units = select_units(graph, list(run_only) if run_only else None)
    scripts = discover() if scripts is None else scripts
    keys = location_keys(graph.prefix, scripts)
    script = script_of_file(caller, scripts) if caller else None
    script_name = script.name if script is not None else os.path.splitext(os.path.basename(caller or ""))[0]
    tags = {RUN_ID_TAG: run_id, SOURCE_TAG: CLI_RECORDING_SOURCE}
    if script_name:
        tags[SCRIPT_TAG] = script_name
    if description:
        tags["marin/description"] = description[:1000]
    nodes = list({id(node): node for node, _ in units}.values())
    undefined = sorted({n.name for n in nodes if not keys.known(n)})
    if undefined:
        where = (
            f"script {script.name}" if script is not None else f"{caller or 'this script'} (not listed in [tool.marin])"
        )
        # A script inside the project that its pyproject does not list is worth a warning. One kept
        # elsewhere (a team's own folder, a scratch script) is a normal way to run: the project's
        # pyproject is not the team's to edit, so only the debug log says how (issue 38).
        outside = script is None and caller is not None and _outside_project(caller)
        logger.log(
            logging.DEBUG if outside else logging.WARNING,
            "%d step(s) of %s are not defined in the code location, recorded as external assets without lineage: %s%s%s",
            len(undefined),
            where,
            ", ".join(undefined[:10]),
            " ..." if len(undefined) > 10 else "",
            "" if script is not None else f" -- {how_to_list(caller)}",
        )
        tags[UNDEFINED_TAG] = ", ".join(undefined)[:1000]
    records = unit_records(graph, units, keys, run_id, report)
    for partition_set in sorted({n.partitioned_by for n in nodes if n.partitioned_by is not None}):
        recorded = {r.partition for r in records if r.partition is not None and r.node.partitioned_by == partition_set}
        if recorded:
            instance.add_dynamic_partitions(partition_set, sorted(recorded))
    observe_partition_sets(instance, nodes)
    counts = {a: sum(1 for r in records if r.action == a) for a in ("ran", "cached", "waited", "failed", "dep_failed")}
    tags.update({f"marin/{action}": str(n) for action, n in counts.items() if n})
    job_name = _INVALID_NAME_CHARS.sub("_", f"executor_main__{script_name}" if script_name else "executor_main")
    job = recording_job(job_name, records, keys, graph.prefix, run_id, instance)
    # The engine already reported every unit; the recording run's own event log (DEBUG by default)
    # goes to the instance, and to the terminal only from this level up.
    level = os.environ.get("MARIN_DAGSTER_LOG_LEVEL", "WARNING").upper()
    result = job.execute_in_process(
        instance=instance,
        tags=tags,
        run_config={"loggers": {"console": {"config": {"log_level": level}}}},
        raise_on_error=False,
    )
    if not result.success and not any(r.action in ("failed", "dep_failed") for r in records):
        # Not the steps' failure (that one the run reports on purpose): the recording's own.
        raise RuntimeError(f"the recording run {result.run_id} failed; its event log in the instance says why")
    if started is not None and ended is not None:
        set_run_times(instance, result.run_id, started, ended)
    logger.info("recorded in Dagster instance %s as run %s", os.environ["DAGSTER_HOME"], result.run_id)
    return [result.run_id]


register_run_observer(OBSERVER_NAME, record_cli_run)
