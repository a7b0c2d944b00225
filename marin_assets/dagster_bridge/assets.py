"""Turn executor steps into Dagster software-defined assets.

One asset per step: the asset key comes from the step name (``tokenized/web`` ->
``["tokenized", "web_tokens"]``, see :func:`asset_key_for`), the code version is the step's hash, deps come from the step's
InputNames, and the group is the experiment. Materializing an asset runs the step through the
same engine as ``executor_main`` (same status and lease files), so the UI and the command line
never disagree; a step that was already SUCCESS records a materialization marked as cached.

This module is glue only: no stage logic lives here.
"""

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from marin_assets.browse.links import browser_url
from marin_assets.dagster_bridge.experiment_records import record_dagster_run
from marin_assets.dagster_bridge.location_graph import AssetKeys, GraphView, definition_graph
from marin_assets.dagster_bridge.location_graph import asset_key_for as asset_key_for  # re-exported
from marin_assets.dagster_bridge.metadata import to_dagster_metadata, uri_metadata
from marin_assets.dagster_bridge.partition_sets import partition_set_key
from marin_assets.dagster_bridge.progress import with_progress_logs
from marin_assets.dagster_bridge.unit_run import SOURCE_TAG as SOURCE_TAG  # re-exported: jobs tag their runs
from marin_assets.dagster_bridge.unit_run import (
    InputFailedError,
    bring_inputs,
    code_version_of,
    depends_on_partition_set,
    is_explicit_request,
    reason_for,
    unit_label,
)
from marin_assets.execution.declarations import Experiment as Experiment  # re-exported (declared Dagster-free)
from marin_assets.execution.declarations import StepCheck as StepCheck
from marin_assets.execution.declarations import StepSchedule as StepSchedule
from marin_assets.execution.declarations import partition_sources
from marin_assets.execution.executor_main import PartitionSource, default_prefix, resolve_partitions
from marin_assets.execution.runner import (
    ExecutorOptions,
    StepFailedError,
    StepOutcome,
    StepRunner,
    Unit,
    function_name,
    is_ray_remote_function,
)
from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.execution.step import ExecutorStep
from marin_assets.execution.versioning import ResolvedStep, StepGraph, version_json

RUN_ID_TAG = "marin/run_id"
_INVALID_KEY_CHARS = re.compile(r"[^A-Za-z0-9_]")


def step_failure(label: str, output_path: str, error: Exception) -> dg.Failure:
    """The Dagster failure of a step: the real cause (the last line of the recorded traceback) is
    its first line, above Dagster's own stack trace; the full traceback is in its metadata."""
    status = read_status(output_path)
    recorded = (status.error or "") if status is not None and status.error else ""
    lines = [line.strip() for line in recorded.strip().splitlines() if line.strip()]
    cause = lines[-1] if lines else (str(error).strip().splitlines() or [type(error).__name__])[0]
    return dg.Failure(
        description=f"{cause}  [step {label}, output {output_path}]",
        metadata={
            "marin/error": dg.MetadataValue.md(f"```\n{(recorded or str(error))[-20000:]}\n```"),
            "dagster/uri": uri_metadata(output_path),
        },
        allow_retries=False,
    )


class GraphCache:
    """Resolved graphs per (prefix, partition keys): resolving is cheap but not free for 1k steps."""

    def __init__(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self._graphs: dict[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], StepGraph] = {}

    def get(self, prefix: str, partitions: Mapping[str, Sequence[str]]) -> StepGraph:
        key = (prefix, tuple(sorted((k, tuple(sorted(v))) for k, v in partitions.items())))
        if key not in self._graphs:
            self._graphs[key] = StepGraph(self.experiment.steps, prefix, {k: list(v) for k, v in partitions.items()})
        return self._graphs[key]


def _partition_keys_at_runtime(
    context: dg.AssetExecutionContext,
    sources: Mapping[str, PartitionSource],
    partition_sets: Sequence[str],
    prefix: str,
) -> dict[str, list[str]]:
    """Keys of every partition set: the Dagster instance's (the UI's truth), else the experiment's sources.

    A source is only called for a set the instance holds no keys of: the sensor already verified
    the instance's drops, and discovering them again (checksums) on every materialization would not scale.
    """
    keys: dict[str, list[str]] = {}
    for name in {*sources, *partition_sets}:
        instance_keys = sorted(set(context.instance.get_dynamic_partitions(name)))
        if instance_keys or name not in sources:
            keys[name] = instance_keys
        else:
            keys[name] = resolve_partitions({name: sources[name]}, prefix)[name]
    return keys


def _make_compute(
    experiment: Experiment,
    step: ExecutorStep,
    cache: GraphCache,
    partitions_defs: Mapping[str, dg.PartitionsDefinition],
    checks: Sequence[StepCheck] = (),
    keys: "AssetKeys | None" = None,
    sources: tuple[Mapping[str, PartitionSource], str | None] = ({}, None),
    asset_key: dg.AssetKey | None = None,
) -> Callable[..., dg.MaterializeResult]:
    """The materialization of one step (``asset_key``), for the op that holds its asset."""
    partition_sources, source_error = sources

    def compute(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        prefix = _resource_prefix(context.resources.marin_storage)
        partition_keys = _partition_keys_at_runtime(context, partition_sources, list(partitions_defs), prefix)
        graph = cache.get(prefix, partition_keys)
        node = graph.resolved(step)
        empty = [name for name in _consumed_sets(node) if not partition_keys.get(name)]
        if empty and source_error is not None:  # never zero partitions without a word
            raise dg.Failure(description=f"{node.name}: {source_error}", allow_retries=False)
        key_of = keys.key_for if keys is not None else (lambda n: asset_key_for(n.asset_name))
        partition = context.partition_key if step.partitioned_by else None
        run_tag = context.run.tags.get(RUN_ID_TAG)
        explicit = is_explicit_request(context.run.tags)
        options = ExecutorOptions(
            run_id=run_tag or context.run_id[:12],
            heartbeat_s=experiment.heartbeat_s,
            stale_s=experiment.stale_s,
            force_run_failed=explicit,
        )
        executor = StepRunner(options)
        label = unit_label((node, partition))
        try:
            if explicit:
                bring_inputs(
                    executor,
                    (node, partition),
                    graph,
                    lambda u, o, r: _record_input(context, u, o, r, key_of, asset_key or key_of(node), prefix),
                )
            reason = reason_for((node, partition))
            # The browser and the maintenance commands read lineage from experiment records.
            record_dagster_run(graph, experiment, options.run_id, context.run.tags)
            outcome = executor.execute_unit((node, partition), graph)
        except InputFailedError as exc:  # the input's own cause first, then which input of what
            input_node, input_partition = exc.unit
            where = f"{unit_label(exc.unit)}, an input of {label}"
            raise step_failure(where, input_node.partition_output_path(input_partition), exc) from exc
        except StepFailedError as exc:
            raise step_failure(label, node.partition_output_path(partition), exc) from exc
        status = read_status(outcome.output_path)
        computed_here = outcome.action == "ran" or (
            run_tag is not None and status is not None and status.run_id == run_tag
        )
        metadata = to_dagster_metadata(read_metadata(outcome.output_path))
        metadata.update(
            {
                "dagster/uri": uri_metadata(outcome.output_path),
                "marin/cached": dg.MetadataValue.bool(not computed_here),
                "marin/action": dg.MetadataValue.text(
                    outcome.action if not computed_here or outcome.action == "ran" else "ran (executor_main)"
                ),
                # A recording of a command-line run finds the step SUCCESS ("cached" to this run):
                # the reason is then that the command line computed it, not "cached".
                "marin/reason": dg.MetadataValue.text(
                    reason
                    if outcome.action == "ran"
                    else (f"computed by command-line run {run_tag}" if computed_here else outcome.action)
                ),
                "marin/hash": dg.MetadataValue.text(node.hash),
                "marin/code_version": dg.MetadataValue.text(code_version_of(node)),
                "marin/version": dg.MetadataValue.json(_plain_version(node)),
                "marin/seconds": dg.MetadataValue.float(round(outcome.seconds, 3)),
                **_browser_link(outcome.output_path, prefix),
            }
        )
        if outcome.action == "waited" and status is not None and status.run_id:  # which run did the work
            metadata["marin/computed_by_run"] = dg.MetadataValue.text(status.run_id)
        if outcome.action == "ran":
            # Only real work is logged: on a cached re-run each log line is an event-log write,
            # and the metadata already says "cached".
            context.log.info(f"{node.name}: computed {outcome.output_path} in {outcome.seconds:.1f}s")
        check_results = []
        selected_checks = context.selected_asset_check_keys
        for check in checks:
            if dg.AssetCheckKey(asset_key or key_of(node), check.name) not in selected_checks:
                continue
            try:
                passed, check_meta = check.fn(outcome.output_path, partition, prefix)
            except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a failed asset
                passed, check_meta = False, {"error": f"{type(exc).__name__}: {exc}"}
            if partition is not None:  # the check's view names the drop it judged
                check_meta = {"partition": partition, **check_meta}
            check_results.append(
                dg.AssetCheckResult(
                    asset_key=asset_key,
                    check_name=check.name,
                    passed=bool(passed),
                    metadata=to_dagster_metadata(check_meta),
                    severity=dg.AssetCheckSeverity.ERROR,
                    description=f"partition {partition}" if partition is not None else None,
                )
            )
        return dg.MaterializeResult(
            asset_key=asset_key,
            metadata=metadata,
            data_version=dg.DataVersion(node.hash),
            check_results=check_results,
        )

    return with_progress_logs(compute)  # training/eval progress lines in the run's logs


def _record_input(
    context: dg.AssetExecutionContext,
    unit: Unit,
    outcome: StepOutcome,
    reason: str,
    key_of: Callable[[ResolvedStep], dg.AssetKey],
    for_key: dg.AssetKey,
    prefix: str,
) -> None:
    """Record an input this run brought along as a materialization of its own asset, with what
    a materialization of its own records (browser link, version, code version, seconds)."""
    node, partition = unit
    if outcome.action == "ran":
        context.log.info(f"{unit_label(unit)}: input computed first ({reason})")
    context.log_event(
        dg.AssetMaterialization(
            asset_key=key_of(node),
            partition=partition,
            metadata={
                **to_dagster_metadata(read_metadata(outcome.output_path)),
                "dagster/uri": uri_metadata(outcome.output_path),
                "marin/cached": dg.MetadataValue.bool(outcome.action != "ran"),
                "marin/action": dg.MetadataValue.text(f"{outcome.action} (input of {for_key.to_user_string()})"),
                "marin/reason": dg.MetadataValue.text(reason),
                "marin/hash": dg.MetadataValue.text(node.hash),
                "marin/code_version": dg.MetadataValue.text(code_version_of(node)),
                "marin/version": dg.MetadataValue.json(_plain_version(node)),
                "marin/seconds": dg.MetadataValue.float(round(outcome.seconds, 3)),
                **_browser_link(outcome.output_path, prefix),
            },
        )
    )


def _consumed_sets(node: ResolvedStep) -> list[str]:
    """Partition sets the step reads every partition of."""
    return sorted({d.partitioned_by for d in node.all_partition_inputs if d.partitioned_by is not None})


def _resource_prefix(storage: Any) -> str:
    root = getattr(storage, "root", None)
    prefix = root() if callable(root) else (getattr(storage, "prefix", None) or default_prefix())
    return prefix if "://" in prefix else os.path.abspath(prefix)


def _plain_version(node: ResolvedStep) -> Any:
    """The version dict as plain JSON (versioned dataclasses/tuples become dicts/lists), secrets redacted."""
    return redact_secrets(json.loads(version_json(node.version)))


def _compact_version(node: ResolvedStep) -> Any:
    """The version as the definition shows it: the step's own config, each dependency as its
    ``name-hash`` (the full dict nests every ancestor's version -- megabytes of snapshot for a
    large graph; each materialization's ``marin/version`` carries it in full)."""
    # node.version is canonical already (plain JSON types): no encode/decode round trip.
    version: dict[str, Any] = {"name": node.name, "config": node.version.get("config", {})}
    version["dependencies"] = [f"{d.name}-{d.hash}" for d in node.dependencies]
    if node.pseudo_dependencies:
        version["pseudo_dependencies"] = [f"{d.name}-{d.hash}" for d in node.pseudo_dependencies]
    return redact_secrets(version)


def _browser_link(output_path: str, prefix: str) -> dict[str, Any]:
    """``marin/browser``: the data browser's page of an output (``$MARIN_BROWSER_URL``), if below the prefix."""
    url = browser_url(output_path, prefix)
    return {"marin/browser": dg.MetadataValue.url(url)} if url else {}


def _static_metadata(node: ResolvedStep, prefix: str) -> dict[str, Any]:
    step = node.step
    # Few entries on purpose: each is two serialized objects per asset in every snapshot the
    # webserver loads (a 10,000-step location pays ~0.3 s per entry). The step's name and function
    # are in the description (a plain string); its hash is the code version. The browser link is an
    # entry (a link in the UI) rather than markdown in the description, which the catalog shows raw.
    folder = node.output_path.rpartition("/")[0] if depends_on_partition_set(node) else node.output_path
    meta: dict[str, Any] = _browser_link(folder, prefix)
    if depends_on_partition_set(node):
        # Its hash and path follow the drops it consumes, which change without a code reload:
        # materializations carry them (marin/hash, dagster/uri); the definition shows the pattern.
        base = node.output_path.rpartition("/")[0]
        stem = node.name.rpartition("/")[2]
        meta["marin/output_path_pattern"] = f"{base}/{stem}-<hash of version and drops>"
        # Storage on the asset page reads only definition metadata: the glob of its versions'
        # folders (the current one is each materialization's dagster/uri).
        meta["dagster/uri"] = uri_metadata(f"{base}/{stem}-*")
        return _optional_metadata(node, meta)
    meta["marin/version"] = dg.MetadataValue.json(_compact_version(node))
    # Where the output lives, on the asset page (Storage) before any run: the step's folder, which
    # for a partitioned step holds one subfolder per partition.
    meta["dagster/uri"] = uri_metadata(node.output_path)
    if step.partitioned_by is not None:
        meta["marin/output_path_pattern"] = f"{node.output_path}/<{step.partitioned_by}>"
    return _optional_metadata(node, meta)


def _description(node: ResolvedStep, prefix: str) -> str:
    """The asset's description: the step's own, then which step and function it runs. No markdown
    link: the asset catalog shows descriptions as plain text (the browser link is ``marin/browser``
    in the definition metadata, which the UI renders as a link)."""
    own = node.step.description
    where = f"Step {node.name}, function {function_name(node.step.fn)}"
    return f"{own}\n\n{where}" if own else where


def _optional_metadata(node: ResolvedStep, meta: dict[str, Any]) -> dict[str, Any]:
    step = node.step
    if step.resources is not None:
        meta["marin/resources"] = repr(step.resources)
    if step.pip_dependency_groups:
        meta["marin/pip_dependency_groups"] = ", ".join(step.pip_dependency_groups)
    return meta


def _partition_mapping(node: ResolvedStep, dep: ResolvedStep) -> dg.PartitionMapping | None:
    """How a step's partitions map onto a partitioned dependency's (None: Dagster's default)."""
    if dep.partitioned_by is None:
        return None
    specific = sorted({k for d, k in node.specific_partition_inputs if d is dep})
    same = any(d is dep for d in node.same_partition_inputs) and node.partitioned_by == dep.partitioned_by
    if any(d is dep for d in node.all_partition_inputs) or (specific and same):
        return dg.AllPartitionMapping()
    if specific:
        return dg.SpecificPartitionsPartitionMapping(specific)
    return None


@dataclass
class StepAssetMember:
    """One step's asset, before it is placed in an op (see :func:`assemble_step_ops`)."""

    spec: dg.AssetSpec
    checks: list[dg.AssetCheckSpec]
    compute: Callable[..., dg.MaterializeResult]
    partition_set: str | None
    upstream_mappings: dict[dg.AssetKey, str]
    """repr of the partition mapping to each upstream key (Dagster wants one per key within an op)."""


def step_asset_members(
    experiment: Experiment,
    partitions_defs: dict[str, dg.PartitionsDefinition],
    prefix: str,
    keys: AssetKeys,
    graph: "StepGraph | GraphView",
    emitted: dict[dg.AssetKey, str] | None = None,
) -> list[StepAssetMember]:
    """The assets of ``experiment``'s distinct steps (merged duplicates become one asset).

    ``emitted`` (asset key -> code version) carries the steps earlier experiments already turned
    into assets: an experiment that builds on another (the quickstart on curation) reuses them.
    ``partitions_defs`` is shared across experiments (mutated): one DynamicPartitionsDefinition per set.
    """
    try:  # partition sets without a given source: the one their steps declare, or an error at run time
        sources: tuple[Mapping[str, PartitionSource], str | None] = (
            partition_sources(
                experiment.steps,
                experiment.partitions,
                [n.step for n in graph.topological() if n.partitioned_by is not None],
            ),
            None,
        )
    except ValueError as exc:
        sources = (experiment.partitions, str(exc))
    cache = GraphCache(experiment)
    checks_by_node: dict[int, list[StepCheck]] = {}
    for check in experiment.checks:
        checks_by_node.setdefault(id(graph.resolved(check.step)), []).append(check)
    eager_nodes = {id(graph.resolved(s)) for s in experiment.eager_steps}
    members: list[StepAssetMember] = []
    seen_keys: dict[dg.AssetKey, str] = {}
    for node in graph.topological():
        key = keys.key_for(node)
        if key in seen_keys:
            raise ValueError(
                f"steps {seen_keys[key]!r} and {node.name!r} map to the same asset key {key.to_user_string()}"
            )
        seen_keys[key] = node.name
        if emitted is not None:
            if key in emitted:
                continue  # another experiment's asset: same key means same name and code version
            emitted[key] = code_version_of(node)
        deps = []
        for dep in (*node.dependencies, *node.pseudo_dependencies):
            deps.append(dg.AssetDep(keys.key_for(dep), partition_mapping=_partition_mapping(node, dep)))
        # Reading every partition: the partition set is an input too (its data version = its keys).
        deps.extend(dg.AssetDep(partition_set_key(name)) for name in _consumed_sets(node))
        node_checks = checks_by_node.get(id(node), [])
        if node.partitioned_by is not None:
            partitions_defs.setdefault(node.partitioned_by, dg.DynamicPartitionsDefinition(name=node.partitioned_by))
        spec = dg.AssetSpec(
            key=key,
            deps=deps,
            code_version=code_version_of(node),
            group_name=keys.group_of(node) or experiment.name,
            description=_description(node, prefix),
            metadata=_static_metadata(node, prefix),
            kinds={"ray"} if (node.step.resources is not None or is_ray_remote_function(node.step.fn)) else None,
            automation_condition=dg.AutomationCondition.eager() if id(node) in eager_nodes else None,
        )
        check_specs = [
            dg.AssetCheckSpec(c.name, asset=key, description=c.description, blocking=c.blocking) for c in node_checks
        ]
        compute = _make_compute(experiment, node.step, cache, partitions_defs, node_checks, keys, sources, key)
        wanted = {d.asset_key: repr(d.partition_mapping) for d in deps}
        members.append(StepAssetMember(spec, check_specs, compute, node.partitioned_by, wanted))
    return members


def assemble_step_ops(
    members: Sequence[StepAssetMember], name: str, partitions_defs: Mapping[str, dg.PartitionsDefinition]
) -> list[dg.AssetsDefinition]:
    """Place ``members`` in as few subsettable ops as Dagster allows, named ``<name>__<set or steps>``.

    One op per partition set (and one for unpartitioned steps) holding every asset as a spec:
    Dagster builds, snapshots and hashes one op instead of one per step (one per step made a
    10,000-step location several times slower to load than plain asset specs), and a dependency
    between two assets of one op is no op input (an op per script gave a 100-script location
    10,000 inputs). The op can be subset, so materializing one asset runs that step only.
    Dagster wants one partition mapping per upstream key within an op: a step that reads another
    step's partitions differently from its op-mates (all drops vs. a fixed one) opens a new op.
    """
    ops: dict[tuple[str | None, int], list[StepAssetMember]] = {}
    mappings: dict[tuple[str | None, int], dict[dg.AssetKey, str]] = {}
    for member in members:
        index = 0
        while any(
            mappings.get((member.partition_set, index), {}).get(k, m) != m for k, m in member.upstream_mappings.items()
        ):
            index += 1
        mappings.setdefault((member.partition_set, index), {}).update(member.upstream_mappings)
        ops.setdefault((member.partition_set, index), []).append(member)
    return [
        _group_op(name, set_name, index, op_members, partitions_defs.get(set_name) if set_name else None)
        for (set_name, index), op_members in ops.items()
    ]


def build_step_assets(
    experiment: Experiment,
    partitions_defs: dict[str, dg.PartitionsDefinition] | None = None,
    prefix: str | None = None,
    emitted: dict[dg.AssetKey, str] | None = None,
    keys: AssetKeys | None = None,
    graph: StepGraph | None = None,
) -> list[dg.AssetsDefinition]:
    """One asset per distinct step of ``experiment``, in ops of its own (``<experiment>__steps``).

    The code location places every experiment's assets in shared ops instead (see
    :func:`assemble_step_ops`); this builds one experiment alone (tests, command-line recordings).
    """
    partitions_defs = partitions_defs if partitions_defs is not None else {}
    prefix = prefix or default_prefix()
    graph = graph if graph is not None else definition_graph(experiment, prefix)
    keys = keys if keys is not None else AssetKeys([graph], [experiment.name])
    members = step_asset_members(experiment, partitions_defs, prefix, keys, graph, emitted)
    return assemble_step_ops(members, experiment.name, partitions_defs)


def _group_op(
    name: str,
    partition_set: str | None,
    index: int,
    members: list[StepAssetMember],
    partitions_def: dg.PartitionsDefinition | None,
) -> dg.AssetsDefinition:
    """One subsettable op materializing the selected steps of ``members`` (in dependency order)."""
    computes = {m.spec.key: m.compute for m in members}
    op_name = _INVALID_KEY_CHARS.sub("_", f"{name}__{partition_set or 'steps'}" + (f"_{index}" if index else ""))

    @dg.multi_asset(
        name=op_name,
        specs=[m.spec for m in members],
        check_specs=[c for m in members for c in m.checks],
        partitions_def=partitions_def,
        can_subset=True,
        # Every step gets the (lazy) "ray" resource: stage functions that shard work on Ray call
        # ensure_ray() themselves, and the resource's settings must reach it.
        required_resource_keys={"marin_storage", "ray"},
    )
    def _steps(context: dg.AssetExecutionContext):
        selected = context.selected_asset_keys
        for key, compute in computes.items():  # topological order: inputs first
            if key in selected:
                yield compute(context)

    return _steps
