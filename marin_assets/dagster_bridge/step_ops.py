"""The ops that run steps: one subsettable op per partition set, running its selection concurrently.

Every group's steps share one subsettable ``multi_asset`` per partition set (``marin__steps``,
``marin__<set>``): Dagster builds, snapshots and hashes one op instead of one per step, which
keeps a 10,000-step location's load near plain asset specs (``bench/location_load``; an op per
step made it several times slower), and a dependency between two assets of one op is no op input.
Materializing one asset runs that step only; a selection runs as ``executor_main`` runs it
(``step_run``: ready steps at once, a failure stops only its descendants).

The op receives the storage and the Ray resources as typed parameters: the prefix is the storage
resource's ``root()`` when the run starts, and setting the Ray resource up makes its settings the
engine's default for the steps that run on Ray.

The location's jobs run their ops in the run worker itself (:data:`RUN_EXECUTOR`).
"""

# No ``from __future__ import annotations``: Dagster reads the op's resource parameters from
# their annotations, which must be classes.
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

# The executor of the location's jobs (``__ASSET_JOB``, the experiments' jobs). A run's steps run
# concurrently inside its group op already (threads, Ray tasks), so Dagster's default multiprocess
# executor only added a process per op that imports Dagster and loads the whole location again,
# then waits for it to exit: 2.5-3 s of a UI run on a 2-core machine at load 3, 4-8 s at load 7-9
# (``bench/ui_run --phases``). In process, the run worker that already loaded the location runs
# the op. The cost: two ops of one run (a rare second op of a partition set) run one after the other.
RUN_EXECUTOR = dg.in_process_executor


def assemble_step_ops(
    members: Sequence[StepAssetMember], name: str, partitions_defs: Mapping[str, dg.PartitionsDefinition]
) -> list[dg.AssetsDefinition]:
    """Place ``members`` in as few subsettable ops as Dagster allows, named ``<name>__<set or steps>``.

    One op per partition set (and one for unpartitioned steps) holding every asset as a spec.
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
        _group_op(name, set_name, index, op_members, partitions_defs) for (set_name, index), op_members in ops.items()
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
    partitions_defs: Mapping[str, dg.PartitionsDefinition],
) -> dg.AssetsDefinition:
    """One subsettable op materializing the selected steps of ``members``."""
    targets = {m.spec.key: m.target for m in members}
    op_name = _INVALID_KEY_CHARS.sub("_", f"{name}__{partition_set or 'steps'}" + (f"_{index}" if index else ""))

    @dg.multi_asset(
        name=op_name,
        specs=[m.spec for m in members],
        check_specs=[c for m in members for c in m.checks],
        partitions_def=partitions_defs.get(partition_set) if partition_set else None,
        can_subset=True,
    )
    def _steps(context: dg.AssetExecutionContext, marin_storage: MarinStorageResource, ray: RayResource):
        # ``ray`` is set up before the op starts (its settings become the engine's default, so
        # stage functions that shard work on Ray reach this run's cluster); steps connect lazily.
        selected = context.selected_asset_keys
        yield from run_selected_steps(
            context, marin_storage.root(), {k: t for k, t in targets.items() if k in selected}, list(partitions_defs)
        )

    return _steps
