"""The ops that run steps: a watched step in an op of its own, cheap steps packed in shared ops.

Cheap steps of every group share one subsettable ``multi_asset`` per partition set (``marin__steps``,
``marin__<set>``): Dagster builds, snapshots and hashes one op instead of one per step, which
keeps a 10,000-step location's load near plain asset specs (``bench/location_load``; an op per
step made it several times slower), and a dependency between two assets of one op is no op input.
Materializing one asset runs that step only; a selection runs as ``executor_main`` runs it
(``step_run``: ready steps at once, a failure stops only its descendants).

A step people watch run for minutes or hours (tokenization, training, evaluation, an accelerator,
or ``watched=True``: :func:`~marin_assets.dagster_bridge.step_specs.is_watched`) is an op of its
own (``marin__<its key>``): the run page draws its bar with its duration, lists its status, filters
its logs, retries it (``$MARIN_WATCHED_RETRIES``), re-executes it alone and terminates it (its Ray
task is cancelled). Cheap steps after a watched one sit in a packed op of the next level
(``marin__steps_l1``), so no two ops wait on each other.

The op receives the storage and the Ray resources as typed parameters: the prefix is the storage
resource's ``root()`` when the run starts, and setting the Ray resource up makes its settings the
engine's default for the steps that run on Ray.

The location's jobs run their ops in the run worker itself, or in processes of their own when a
run holds several watched ops (:data:`RUN_EXECUTOR`).
"""

# No ``from __future__ import annotations``: Dagster reads the op's resource parameters from
# their annotations, which must be classes.
import os
import re
from collections.abc import Mapping, Sequence

import dagster as dg

from marin_assets.dagster_bridge.location_graph import AssetKeys, definition_graph
from marin_assets.dagster_bridge.step_run import run_selected_steps
from marin_assets.dagster_bridge.step_specs import StepAssetMember, step_asset_members
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.versioning import StepGraph
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from marin_resources.storage import default_prefix

_INVALID_KEY_CHARS = re.compile(r"[^A-Za-z0-9_]")

WATCHED_OP_TAG = "marin/watched"
"""Op tag of a watched step's own op (what :data:`RUN_EXECUTOR` counts)."""
WATCHED_RETRIES_ENV = "MARIN_WATCHED_RETRIES"
"""Dagster retries of a watched step's op after a failure (default 0: a user re-executes it)."""


def _run_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """The location's jobs' executor: in process, unless the run holds several watched ops.

    A run's packed steps run concurrently inside their op already (threads, Ray tasks), so Dagster's
    multiprocess executor only added a process per op that imports Dagster and loads the whole
    location again, then waits for it to exit: 2.5-3 s of a UI run on a 2-core machine at load 3,
    4-8 s at load 7-9 (``bench/ui_run --phases``). In process, the run worker that already loaded
    the location runs the ops -- one after the other. A run with several watched ops (a sweep's
    trainings, each its own op) runs them in processes of their own instead, at the same time: a
    few seconds per op against steps that run for minutes.
    """
    job = init_context.job.get_definition()
    watched = sum(1 for node in job.nodes if node.definition.tags.get(WATCHED_OP_TAG))
    chosen = dg.multiprocess_executor if watched > 1 else dg.in_process_executor
    if watched > 1 and not init_context.executor_config.get("max_concurrent"):
        # Dagster's default is one process per core (2 here): a sweep's 8 trainings would go two by
        # two, though each op mostly waits on its Ray task or subprocess. Every op may start at once
        # (Ray places their tasks by resources); the run config's max_concurrent still limits them.
        config = {**init_context.executor_config, "max_concurrent": len(job.nodes)}
        init_context = init_context._replace(executor_config=config)
    create = chosen.executor_creation_fn
    if create is None:  # Dagster's own executors always have one
        raise RuntimeError(f"Dagster's {chosen.name} executor has no creation function")
    return create(init_context)


# The executor of the location's jobs (``__ASSET_JOB``, the experiments' jobs): see _run_executor.
# Its config is the multiprocess executor's (a superset of what the in-process one reads).
RUN_EXECUTOR = dg.ExecutorDefinition(
    name="marin_steps",
    config_schema=dg.multiprocess_executor.config_schema.as_field(),
    executor_creation_fn=_run_executor,
    requirements=dg.multiple_process_executor_requirements(),
    description="In process; multiprocess when a run holds several watched steps (ops of their own)",
)


def _levels(members: Sequence[StepAssetMember]) -> dict[dg.AssetKey, int]:
    """Watched steps on the longest path to each member (the member itself not counted).

    Cheap steps are packed by level: a packed op then never both feeds a watched op and reads from
    it, so splitting the watched steps out never makes a cycle between ops.
    """
    watched = {m.spec.key: m.watched for m in members}
    levels: dict[dg.AssetKey, int] = {}
    for member in members:  # dependencies first (each experiment's topological order)
        levels[member.spec.key] = max(
            (levels[d.asset_key] + watched[d.asset_key] for d in member.spec.deps if d.asset_key in levels),
            default=0,
        )
    return levels


def assemble_step_ops(
    members: Sequence[StepAssetMember], name: str, partitions_defs: Mapping[str, dg.PartitionsDefinition]
) -> list[dg.AssetsDefinition]:
    """Place ``members`` in ops: a watched step alone (``<name>__<its key>``, see
    :func:`~marin_assets.dagster_bridge.step_specs.is_watched`), cheap steps in as few
    subsettable ops as Dagster allows, named ``<name>__<set or steps>``.

    One op per partition set (and one for unpartitioned steps) holding every cheap asset as a spec,
    per level of watched steps above it (``_l<level>`` from level 1: the cheap steps after a
    training). Dagster wants one partition mapping per upstream key within an op: a step that reads
    another step's partitions differently from its op-mates (all drops vs. a fixed one) opens a new op.
    """
    levels = _levels(members)
    ops: dict[tuple[str | None, int, int], list[StepAssetMember]] = {}
    mappings: dict[tuple[str | None, int, int], dict[dg.AssetKey, str]] = {}
    watched_ops: list[dg.AssetsDefinition] = []
    for member in members:
        if member.watched:
            watched_ops.append(_watched_op(name, member, partitions_defs))
            continue
        level, index = levels[member.spec.key], 0
        while any(
            mappings.get((member.partition_set, level, index), {}).get(k, m) != m
            for k, m in member.upstream_mappings.items()
        ):
            index += 1
        mappings.setdefault((member.partition_set, level, index), {}).update(member.upstream_mappings)
        ops.setdefault((member.partition_set, level, index), []).append(member)
    return [
        _group_op(name, set_name, level, index, op_members, partitions_defs)
        for (set_name, level, index), op_members in ops.items()
    ] + watched_ops


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
    level: int,
    index: int,
    members: list[StepAssetMember],
    partitions_defs: Mapping[str, dg.PartitionsDefinition],
) -> dg.AssetsDefinition:
    """One subsettable op materializing the selected steps of ``members``."""
    suffix = (f"_l{level}" if level else "") + (f"_{index}" if index else "")
    op_name = _INVALID_KEY_CHARS.sub("_", f"{name}__{partition_set or 'steps'}{suffix}")
    return _steps_op(op_name, members, partitions_defs, partition_set, can_subset=True)


def _watched_op(
    name: str, member: StepAssetMember, partitions_defs: Mapping[str, dg.PartitionsDefinition]
) -> dg.AssetsDefinition:
    """The op of one watched step: its own bar, status, logs, retries, re-execution and termination."""
    op_name = _INVALID_KEY_CHARS.sub("_", f"{name}__{'__'.join(member.spec.key.path)}")
    retries = int(os.environ.get(WATCHED_RETRIES_ENV) or 0)
    return _steps_op(
        op_name,
        [member],
        partitions_defs,
        member.partition_set,
        can_subset=bool(member.checks),  # its checks may be selected apart from it
        op_tags={WATCHED_OP_TAG: "true"},
        retry_policy=dg.RetryPolicy(max_retries=retries) if retries > 0 else None,
    )


def _steps_op(
    op_name: str,
    members: list[StepAssetMember],
    partitions_defs: Mapping[str, dg.PartitionsDefinition],
    partition_set: str | None,
    can_subset: bool,
    op_tags: Mapping[str, str] | None = None,
    retry_policy: dg.RetryPolicy | None = None,
) -> dg.AssetsDefinition:
    targets = {m.spec.key: m.target for m in members}

    @dg.multi_asset(
        name=op_name,
        specs=[m.spec for m in members],
        check_specs=[c for m in members for c in m.checks],
        partitions_def=partitions_defs.get(partition_set) if partition_set else None,
        can_subset=can_subset,
        op_tags=dict(op_tags) if op_tags else None,
        retry_policy=retry_policy,
    )
    def _steps(context: dg.AssetExecutionContext, marin_storage: MarinStorageResource, ray: RayResource):
        # ``ray`` is set up before the op starts (its settings become the engine's default, so
        # stage functions that shard work on Ray reach this run's cluster); steps connect lazily.
        selected = context.selected_asset_keys
        yield from run_selected_steps(
            context, marin_storage.root(), {k: t for k, t in targets.items() if k in selected}, list(partitions_defs)
        )

    return _steps
