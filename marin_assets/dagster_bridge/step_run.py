"""A Dagster run of some steps, scheduled as ``executor_main`` schedules them.

The op of a group (``step_ops``) hands the selected steps here. They are resolved under the run's
prefix and drop set into one graph, and the engine's own scheduler (:meth:`StepRunner.run`) runs
them: every ready step at once, up to the run's limit (:func:`concurrency_limit`); a failed step
stops only its descendants, which the engine records DEP_FAILED; every other selected step runs.

The op is a listener of the engine's event stream (:mod:`marin_assets.execution.events`, passed in
``ExecutorOptions.listeners``; the run's identity, ``description``, names the Ray driver's job after
the Dagster run and its step). While the scheduler works in a background thread, the listener
queues each event and this generator turns them into Dagster events, in the op's own thread
(Dagster's run log is written from one thread):

* a line per step when it starts (with why it runs), ends (seconds, or the cause of its failure)
  or is not run (DEP_FAILED, naming the failed input); each line starts with the step's label,
  so filtering the run's logs by a step's name shows that step's lines alone -- its progress lines
  and every line it prints (in this process or on a Ray worker) included, once each;
* the same states as structured events on the step's own asset: an ``AssetObservation`` with
  ``marin/state`` ``running`` (and ``marin/started``) when it starts, ``failed`` (``marin/seconds``,
  ``marin/cause``) or ``not run`` (``marin/cause``) -- so the run's event log (type filter
  *Observation*) and each asset's Events tab say which step runs, since when, and why one did not
  finish; a step that succeeds ends with its materialization;
* the step's materialization the moment it succeeds (``marin/seconds``, ``marin/started``, its
  metadata, its checks);
* inputs an explicit request brought along (units that were not SUCCESS), recorded as
  materializations of their own assets;
* at the end, one failure naming each failed step with its cause first (``step_failures``).

A step whose input failed yields nothing (outputs of a subsettable op are optional); a step whose
inputs succeeded always runs, so another step's failure never leaves it unmaterialized.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.dagster_internals import (  # RESUME_RETRY_TAG: a "Re-execute from failure" run
    INPUT_DATA_VERSION_TAG_PREFIX,
    INPUT_EVENT_POINTER_TAG_PREFIX,
    RESUME_RETRY_TAG,
    partitions_data_version,
)
from marin_assets.dagster_bridge.experiment_records import record_dagster_run
from marin_assets.dagster_bridge.location_graph import AssetKeys
from marin_assets.dagster_bridge.metadata import to_dagster_metadata, uri_metadata
from marin_assets.dagster_bridge.partition_sets import partition_set_key, partition_set_version
from marin_assets.dagster_bridge.progress import run_description
from marin_assets.dagster_bridge.step_failures import FailedStep, failure_cause, run_failure
from marin_assets.dagster_bridge.step_specs import StepTarget, browser_link, consumed_sets, plain_version
from marin_assets.dagster_bridge.unit_run import (
    code_version_of,
    is_explicit_request,
    reason_for,
    recorded_seconds,
    unit_label,
    version_tags,
)
from marin_assets.execution.events import Done, EventListener, Failed, Progress, Started, StepEvent
from marin_assets.execution.executor_main import resolve_partitions
from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions, StepOutcome
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import STATUS_SUCCESS, read_metadata, read_status
from marin_assets.execution.step import PartitionSource
from marin_assets.execution.units import Unit, input_units, unit_dependencies
from marin_assets.execution.versioning import ResolvedStep, StepGraph

RUN_ID_TAG = "marin/run_id"
MAX_CONCURRENT_TAG = "marin/max_concurrent"
MAX_CONCURRENT_ENV = "MARIN_MAX_CONCURRENT"
STOP_GRACE_S = 10.0  # how long a terminated op waits for its cancelled steps to stop

UnitKey = tuple[int, str | None]


def _key(unit: Unit) -> UnitKey:
    return (id(unit[0]), unit[1])


def partition_keys_at_runtime(
    instance: dg.DagsterInstance, sources: Mapping[str, PartitionSource], partition_sets: Sequence[str], prefix: str
) -> dict[str, list[str]]:
    """Keys of every partition set: the Dagster instance's (the UI's truth), else the experiment's sources.

    A source is only called for a set the instance holds no keys of: the sensor already verified
    the instance's drops, and discovering them again (checksums) on every materialization would not scale.
    """
    keys: dict[str, list[str]] = {}
    for name in {*sources, *partition_sets}:
        instance_keys = sorted(set(instance.get_dynamic_partitions(name)))
        if instance_keys or name not in sources:
            keys[name] = instance_keys
        else:
            keys[name] = resolve_partitions({name: sources[name]}, prefix)[name]
    return keys


def concurrency_limit(run_tags: Mapping[str, str], targets: Sequence[StepTarget], units: int) -> int:
    """How many steps of this run may run at once.

    The run's tag ``marin/max_concurrent`` (set in the launchpad or on a job), else the smallest of
    the deployment's ``$MARIN_MAX_CONCURRENT`` and the selected experiments' ``max_concurrent``;
    none set: every ready step at once, as ``executor_main``. On a Ray cluster this bounds the
    steps in flight; Ray decides where each runs.
    """
    tagged = run_tags.get(MAX_CONCURRENT_TAG)
    if tagged:
        return _positive(tagged, f"run tag {MAX_CONCURRENT_TAG}")
    limits = [t.experiment.max_concurrent for t in targets if t.experiment.max_concurrent]
    deployment = os.environ.get(MAX_CONCURRENT_ENV)
    if deployment:
        limits.append(_positive(deployment, f"${MAX_CONCURRENT_ENV}"))
    return max(1, min(limits) if limits else units)


def _positive(text: str, where: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise dg.Failure(description=f"{where} must be a positive integer, got {text!r}", allow_retries=False)
    return value


@dataclass
class _RunPlan:
    """The units of one op run: the selected ones, the inputs brought along, and why each runs."""

    graph: StepGraph
    keys: AssetKeys
    selected: dict[UnitKey, tuple[Unit, StepTarget]]
    inputs: dict[UnitKey, tuple[Unit, str]] = field(default_factory=dict)  # input unit, label of who needs it
    reasons: dict[UnitKey, str] = field(default_factory=dict)
    _by_output: dict[str, Unit] = field(default_factory=dict)

    def units(self) -> list[Unit]:
        return [u for u, _ in self.selected.values()] + [u for u, _ in self.inputs.values()]

    def unit_of(self, event: StepEvent) -> Unit:
        """The unit an event of the run's stream is about (by its output: versions of one step, a
        sweep's, share a name)."""
        if not self._by_output:
            self._by_output.update({u[0].partition_output_path(u[1]): u for u in self.units()})
        return self._by_output[event.output_path]

    def label(self, unit: Unit) -> str:
        needed_by = self.inputs.get(_key(unit))
        # The step's name, then its asset key where they differ (``lr_0.05`` is asset ``lr_0_05``):
        # filtering the run's log by either finds the step's lines.
        key = self.keys.key_for(unit[0]).to_user_string()
        named = unit_label(unit) if key == unit[0].name else f"{unit_label(unit)} (asset {key})"
        return named if needed_by is None else f"{named}, an input of {needed_by[1]}"


def _plan(
    context: dg.AssetExecutionContext, prefix: str, targets: Sequence[StepTarget], partition_sets: Sequence[str]
) -> _RunPlan:
    sources: dict[str, PartitionSource] = {}
    for target in targets:
        for name, source in target.sources.items():
            sources.setdefault(name, source)
    partition_keys = partition_keys_at_runtime(context.instance, sources, partition_sets, prefix)
    graph = StepGraph([t.step for t in targets], prefix, partition_keys)
    partition = context.partition_key if context.has_partition_key else None
    plan = _RunPlan(graph, targets[0].keys, {})
    for target in targets:
        node = graph.resolved(target.step)
        unit = (node, partition if node.partitioned_by is not None else None)
        empty = [name for name in consumed_sets(node) if not partition_keys.get(name)]
        if empty and target.source_error is not None:  # never zero partitions without a word
            raise dg.Failure(description=f"{node.name}: {target.source_error}", allow_retries=False)
        plan.selected[_key(unit)] = (unit, target)
    if is_explicit_request(context.run.tags):
        _bring_inputs(plan)
    for unit in plan.units():
        plan.reasons[_key(unit)] = reason_for(unit)
    return plan


def _bring_inputs(plan: _RunPlan) -> None:
    """Add the inputs of the selected units that are not SUCCESS (transitively): a request to have
    an asset brings along what it needs, e.g. the caches of drops that arrived since the last run."""
    seen: set[UnitKey] = set(plan.selected)
    stack = [(unit, unit_label(unit)) for unit, _ in plan.selected.values()]
    while stack:
        unit, needed_by = stack.pop()
        # input_units, not unit_dependencies: an earlier drop of a sequential step whose curation
        # failed is skipped (its order dependency), never brought along to fail this run again.
        for dep in input_units(unit, plan.graph):
            if _key(dep) in seen:
                continue
            seen.add(_key(dep))
            status = read_status(dep[0].partition_output_path(dep[1]))
            if status is not None and status.status == STATUS_SUCCESS:
                continue
            plan.inputs[_key(dep)] = (dep, needed_by)
            stack.append((dep, needed_by))


def _materialized_by_earlier_attempts(context: dg.AssetExecutionContext) -> set[dg.AssetKey]:
    """Assets the failed run (and the attempts before it) materialized, in a re-execution from
    failure: Dagster re-runs the whole failed op with its first selection, but only the failed and
    the not-run steps are left to do (*From asset failure* narrows the selection itself)."""
    run = context.run
    if run.tags.get(RESUME_RETRY_TAG) != "true":
        return set()
    keys: set[dg.AssetKey] = set()
    parent_id = run.parent_run_id
    while parent_id is not None:
        records = context.instance.get_records_for_run(parent_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        for record in records.records:
            event = record.event_log_entry.dagster_event
            if event is not None and event.asset_key is not None:
                keys.add(event.asset_key)
        parent = context.instance.get_run_by_id(parent_id)
        parent_id = parent.parent_run_id if parent is not None else None
    return keys


def _options(
    context: dg.AssetExecutionContext, targets: Sequence[StepTarget], units: int, listener: EventListener
) -> ExecutorOptions:
    experiments = [t.experiment for t in targets]
    return ExecutorOptions(
        # The Dagster run's own id: what a status or `marin/computed_by_run` names is a run the UI finds.
        run_id=context.run.tags.get(RUN_ID_TAG) or context.run_id,
        heartbeat_s=min(e.heartbeat_s for e in experiments),
        stale_s=max(e.stale_s for e in experiments),
        force_run_failed=is_explicit_request(context.run.tags),
        max_concurrent=concurrency_limit(context.run.tags, targets, units),
        description=run_description(context.run_id, context.run.job_name, [t.step.name for t in targets]),
        listeners=(listener,),
    )


def run_selected_steps(
    context: dg.AssetExecutionContext,
    prefix: str,
    selected: Mapping[dg.AssetKey, StepTarget],
    partition_sets: Sequence[str],
) -> Iterator[dg.MaterializeResult]:
    """Run the op's ``selected`` steps under ``prefix``; yield each one's materialization as it
    succeeds; raise one failure naming every failed step at the end."""
    done_before = _materialized_by_earlier_attempts(context)
    if done_before:
        context.log.info(
            f"re-execution from failure: {len(done_before)} asset(s) the failed run(s) materialized are left as they are"
        )
    targets = [t for key, t in selected.items() if key not in done_before]
    if not targets:
        return
    plan = _plan(context, prefix, targets, partition_sets)
    units = plan.units()
    events: queue.Queue = queue.Queue()
    # The op's listener: the scheduler's thread hands each event to this thread, which alone writes
    # the run's log (Dagster's run log is written from one thread).
    options = _options(context, targets, len(units), events.put)
    experiments = {id(t.experiment): t.experiment for t in targets}
    for experiment in experiments.values():  # the browser and the maintenance commands read lineage from these
        # The record holds the experiment's whole graph (as executor_main writes it), not just this selection.
        whole = StepGraph(experiment.steps, prefix, plan.graph.partitions)
        record_dagster_run(whole, experiment, options.run_id, context.run.tags)
    context.log.info(
        f"{len(plan.selected)} step(s) selected, {len(plan.inputs)} input(s) brought along; "
        f"up to {options.max_concurrent} at once"
    )
    stop = threading.Event()
    runner = StepRunner(options)

    def schedule() -> None:
        try:
            runner.run(plan.graph, units=units, stop=stop)
        except ExecutorError:
            events.put(_END)  # each failure was told as it happened
        except BaseException as exc:  # noqa: BLE001 - handed to the op's thread, which raises it
            events.put(exc)
        else:
            events.put(_END)

    thread = threading.Thread(target=schedule, name=f"marin-steps-{context.run_id[:8]}", daemon=True)
    try:
        yield from _drain(context, plan, prefix, events, thread)
    except BaseException as exc:
        # Terminated, interrupted (a code-server restart) or this thread failed: start nothing more
        # and stop the steps running now (their Ray tasks are cancelled, nothing is recorded), then
        # wait briefly for their threads to see it.
        stop.set()
        why = f"the Dagster run {context.run_id} stopped ({type(exc).__name__}: {exc or 'terminated'})"
        stopped = runner.cancel_running(why)
        if stopped:  # what happened, in the run's log: which steps stopped, and that nothing was recorded
            context.log.error(
                f"{why}: stopped {len(stopped)} running step(s), their Ray tasks cancelled and nothing recorded "
                f"for them (a re-execution runs them again): {', '.join(stopped)}"
            )
        if thread.is_alive():
            thread.join(timeout=STOP_GRACE_S)
        raise


_END = object()  # the scheduler's thread ended


def _drain(
    context: dg.AssetExecutionContext,
    plan: _RunPlan,
    prefix: str,
    events: queue.Queue,
    thread: threading.Thread,
) -> Iterator[dg.MaterializeResult]:
    """Turn the run's events into Dagster events until the scheduler ends (see the module docstring)."""
    finished: set[UnitKey] = set()
    failed: dict[UnitKey, FailedStep] = {}
    thread.start()
    while True:
        event = events.get()
        if event is _END or isinstance(event, BaseException):
            thread.join()
            if isinstance(event, BaseException):
                raise event
            break
        unit = plan.unit_of(event)
        label = plan.label(unit)
        if isinstance(event, Progress):
            # The step's progress lines and printed output, each under the step's name (a progress
            # line of a subprocess already names it: ``train: step 3 ...`` keeps its own label).
            named = event.message.startswith(f"{unit_label(unit)}: ")
            context.log.info(event.message if named else f"{unit_label(unit)}: {event.message}")
        elif isinstance(event, Started):
            reason = plan.reasons.get(_key(unit), "requested")
            context.log.info(f"{label}: started ({reason})")
            _observe(context, plan, unit, "running", started=_iso(event.at), reason=reason)
        elif isinstance(event, Done):
            finished.add(_key(unit))
            outcome = StepOutcome(event.step, event.output_path, event.partition, event.action, event.seconds)
            if event.action == "ran":
                context.log.info(f"{label}: done in {event.seconds:.1f}s, {event.output_path}")
            else:
                context.log.info(f"{label}: {event.action}, {event.output_path}")
            started = event.at - event.seconds if event.action == "ran" else None
            yield from _record(context, plan, unit, outcome, started, prefix)
        elif isinstance(event, Failed):
            finished.add(_key(unit))
            failed[_key(unit)] = FailedStep(label, event.output_path, event.error)
            cause, _ = failure_cause(event.output_path, event.error)
            context.log.error(f"{label}: FAILED after {event.seconds:.1f}s: {cause}")
            started_at = _iso(event.at - event.seconds)
            _observe(context, plan, unit, "failed", started=started_at, seconds=round(event.seconds, 3), cause=cause)
    not_run = yield from _not_run(context, plan, finished, failed, prefix)
    if failed:
        raise run_failure(list(failed.values()), not_run)


def _not_run(
    context: dg.AssetExecutionContext,
    plan: _RunPlan,
    finished: set[UnitKey],
    failed: Mapping[UnitKey, FailedStep],
    prefix: str,
) -> Iterator[dg.MaterializeResult]:
    """Units the scheduler did not start: an input failed (DEP_FAILED), or an earlier result that
    stays valid (SUCCESS, recorded as cached). Returns (label, failed input) of those not run."""
    not_run: list[tuple[str, str]] = []
    for unit in plan.units():
        if _key(unit) in finished:
            continue
        node, partition = unit
        path = node.partition_output_path(partition)
        status = read_status(path)
        if status is not None and status.status == STATUS_SUCCESS:
            yield from _record(context, plan, unit, StepOutcome(node.name, path, partition, "cached"), None, prefix)
            continue
        cause = _failed_ancestor(unit, plan, failed)
        not_run.append((plan.label(unit), cause))
        context.log.warning(f"{plan.label(unit)}: not run, input {cause} failed (DEP_FAILED)")
        _observe(context, plan, unit, "not run", cause=f"input {cause} failed (DEP_FAILED)")
    return not_run


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def _observe(context: dg.AssetExecutionContext, plan: _RunPlan, unit: Unit, state: str, **facts: Any) -> None:
    """A structured event of the unit's state on its own asset (see the module docstring)."""
    node, partition = unit
    metadata: dict[str, Any] = {"marin/state": dg.MetadataValue.text(state)}
    for name, value in facts.items():
        metadata[f"marin/{name}"] = dg.MetadataValue.float(value) if isinstance(value, float) else value
    context.log_event(dg.AssetObservation(asset_key=plan.keys.key_for(node), partition=partition, metadata=metadata))


def _failed_ancestor(unit: Unit, plan: _RunPlan, failed: Mapping[UnitKey, FailedStep]) -> str:
    stack, seen = [unit], set()
    while stack:
        current = stack.pop()
        for dep in unit_dependencies(current, plan.graph):
            if _key(dep) in failed:
                return unit_label(dep)
            if _key(dep) not in seen:
                seen.add(_key(dep))
                stack.append(dep)
    return "?"


def _record(
    context: dg.AssetExecutionContext,
    plan: _RunPlan,
    unit: Unit,
    outcome: StepOutcome,
    started: float | None,
    prefix: str,
) -> Iterator[dg.MaterializeResult]:
    """The materialization of a unit that succeeded: a result of the op when selected, else an
    event on the input's own asset."""
    node, partition = unit
    selected = plan.selected.get(_key(unit))
    reason = plan.reasons.get(_key(unit), outcome.action)
    run_tag = context.run.tags.get(RUN_ID_TAG)
    status = read_status(outcome.output_path)
    computed_here = outcome.action == "ran" or (run_tag is not None and status is not None and status.run_id == run_tag)
    metadata = to_dagster_metadata(read_metadata(outcome.output_path))
    metadata.update(
        {
            "dagster/uri": uri_metadata(outcome.output_path),
            "marin/cached": dg.MetadataValue.bool(not computed_here),
            "marin/hash": dg.MetadataValue.text(node.hash),
            "marin/code_version": dg.MetadataValue.text(code_version_of(node)),
            "marin/version": dg.MetadataValue.json(plain_version(node)),
            "marin/seconds": dg.MetadataValue.float(round(outcome.seconds, 3)),
            **browser_link(outcome.output_path, prefix),
        }
    )
    if outcome.action == "waited" and status is not None and status.run_id:  # which run did the work
        metadata["marin/computed_by_run"] = dg.MetadataValue.text(status.run_id)
    engine_run_id = run_tag or context.run_id
    if not computed_here and status is not None and status.run_id and status.run_id != engine_run_id:
        # Done by another run -- e.g. the interrupted run this one re-executes: its seconds and run
        # id, from the status and info files, not this run's 0 s.
        metadata["marin/computed_by_run"] = dg.MetadataValue.text(status.run_id)
        seconds = recorded_seconds(outcome.output_path, status)
        if seconds is not None:
            metadata["marin/seconds"] = dg.MetadataValue.float(round(seconds, 3))
    if started is not None and outcome.action == "ran":
        metadata["marin/started"] = dg.MetadataValue.text(datetime.fromtimestamp(started, UTC).isoformat())
    if selected is None:  # an input this run brought along
        first = plan.inputs[_key(unit)][1]
        metadata["marin/action"] = dg.MetadataValue.text(f"{outcome.action} (input of {first})")
        metadata["marin/reason"] = dg.MetadataValue.text(reason)
        # With the versions a materialization Dagster computes carries: an input brought along
        # (a schedule's run of evaluate bringing prep) must turn stale when its code is edited.
        tags = version_tags(node, _input_versions(context, plan, node, partition))
        context.log_event(
            dg.AssetMaterialization(
                asset_key=plan.keys.key_for(node), partition=partition, metadata=metadata, tags=tags
            )
        )
        return
    _, target = selected
    metadata["marin/action"] = dg.MetadataValue.text(
        outcome.action if not computed_here or outcome.action == "ran" else "ran (executor_main)"
    )
    # A recording of a command-line run finds the step SUCCESS ("cached" to this run): the reason
    # is then that the command line computed it, not "cached".
    metadata["marin/reason"] = dg.MetadataValue.text(
        reason
        if outcome.action == "ran"
        else (f"computed by command-line run {run_tag}" if computed_here else outcome.action)
    )
    asset_key = plan.keys.key_for(node)
    # Dagster reads the inputs' data versions when the op starts: an input this run brought along
    # (logged, not an output) would read as INITIAL and the step as stale at once -- its version is
    # known here.
    brought = {plan.keys.key_for(u[0]) for u, _ in plan.inputs.values()}
    inputs = {k: v for k, v in _input_versions(context, plan, node, partition).items() if k in brought}
    input_tags = {
        k: v
        for k, v in version_tags(node, inputs).items()
        if k.startswith((INPUT_DATA_VERSION_TAG_PREFIX, INPUT_EVENT_POINTER_TAG_PREFIX))
    }
    yield dg.MaterializeResult(
        asset_key=asset_key,
        metadata=metadata,
        data_version=dg.DataVersion(node.hash),
        tags=input_tags or None,
        check_results=_check_results(context, target, asset_key, outcome.output_path, partition, prefix),
    )


def _input_versions(
    context: dg.AssetExecutionContext, plan: _RunPlan, node: ResolvedStep, partition: str | None
) -> dict[dg.AssetKey, tuple[str | None, int | None]]:
    """The data version of each input of ``node`` (of its ``partition``) as Dagster computes it, with
    the storage id of the input's latest materialization (Dagster's event pointer: its staleness
    looks for a partition's materializations after it): an unpartitioned step's version is its hash
    (what its materializations carry), a partitioned step's Dagster's hash of the versions of the
    partitions read (the same drop, or every drop), a partition set's the hash of its keys."""
    versions: dict[dg.AssetKey, tuple[str | None, int | None]] = {}
    for dep in (*node.dependencies, *node.pseudo_dependencies):
        key = plan.keys.key_for(dep)
        latest = context.instance.fetch_materializations(key, limit=1).records
        pointer = latest[0].storage_id if latest else None
        if dep.partitioned_by is None:
            versions[key] = (dep.hash, pointer)
            continue
        if partition is not None and node.partitioned_by == dep.partitioned_by:
            read = [partition]  # the same drop
        else:
            read = list(plan.graph.partitions.get(dep.partitioned_by, []))
        versions[key] = (partitions_data_version(context.instance, key, read), pointer)
    for name in consumed_sets(node):
        versions[partition_set_key(name)] = (partition_set_version(plan.graph.partitions.get(name, [])), None)
    return versions


def _check_results(
    context: dg.AssetExecutionContext,
    target: StepTarget,
    asset_key: dg.AssetKey,
    output_path: str,
    partition: str | None,
    prefix: str,
) -> list[dg.AssetCheckResult]:
    results = []
    selected_checks = context.selected_asset_check_keys
    for check in target.checks:
        if dg.AssetCheckKey(asset_key, check.name) not in selected_checks:
            continue
        try:
            passed, check_meta = check.fn(output_path, partition, prefix)
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check (its error is its metadata)
            passed, check_meta = False, {"error": f"{type(exc).__name__}: {exc}"}
        if partition is not None:  # the check's view names the drop it judged
            check_meta = {"partition": partition, **check_meta}
        results.append(
            dg.AssetCheckResult(
                asset_key=asset_key,
                check_name=check.name,
                passed=bool(passed),
                metadata=to_dagster_metadata(check_meta),
                severity=dg.AssetCheckSeverity.ERROR,
                description=f"partition {partition}" if partition is not None else None,
            )
        )
    return results
