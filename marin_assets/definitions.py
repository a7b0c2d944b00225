"""The Dagster ``Definitions`` of the marin-dagster code location.

Every experiment script the project lists (``[tool.marin] experiments`` in ``pyproject.toml``, or
``$MARIN_EXPERIMENTS``; see :mod:`marin_assets.execution.discovery`) becomes an asset group named
after it (one asset per step; every group's steps run in shared ops, one per partition set), and a
script that declares ``EXPERIMENT`` an asset job ``<script>_job``. A script that fails to import or
to build shows as its group's error (an asset ``experiment_errors/<script>`` whose description
holds the traceback) while every other group loads. An experiment whose partition set's declared
source is a landing zone (:class:`~marin_assets.landing.zone.LandingDrops`, declared by the step
that reads it) gets a drop job and a landing sensor for that source, and the landing zone an
observable asset listing its drops. Steps an experiment declares eager get the automation sensor
``marin_eager_steps``, and schedules their ``StepSchedule`` status; both run as declared, with no
switch to turn on in the UI. The sensor ``experiment_errors_cleanup`` removes the records of error
assets whose script loads again. Resources come from ``marin_resources``: the storage root
(``$MARIN_PREFIX`` as an unresolved ``EnvVar``, read by each run when it starts; else ``./data``)
and Ray (``$RAY_ADDRESS`` or an embedded local Ray).
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

import dagster as dg

from marin_assets.dagster_bridge.landing_assets import (
    build_landing_status_sensor,
    landing_key,
    landing_zone_asset,
    landing_zone_checks,
)
from marin_assets.dagster_bridge.landing_sensor import build_landing_sensor
from marin_assets.dagster_bridge.location_graph import (
    AssetKeys,
    GraphView,
    asset_key_for,
    location_asset_keys,
    location_graphs,
    partition_local_steps,
)
from marin_assets.dagster_bridge.maintenance_jobs import MAINTENANCE_JOBS
from marin_assets.dagster_bridge.partition_sets import build_partition_set_sensor, partition_set_assets
from marin_assets.dagster_bridge.step_ops import RUN_EXECUTOR, assemble_step_ops
from marin_assets.dagster_bridge.step_specs import StepAssetMember, step_asset_members
from marin_assets.dagster_bridge.unit_run import SOURCE_TAG
from marin_assets.execution.declarations import Experiment, declared_partition_sources
from marin_assets.execution.discovery import Script, discover
from marin_assets.execution.versioning import StepGraph
from marin_assets.landing.zone import LandingDrops
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from marin_resources.storage import default_prefix

logger = logging.getLogger("marin.definitions")
ERROR_PREFIX = "experiment_errors"
ERROR_CLEANUP_SENSOR = "experiment_errors_cleanup"
AUTOMATION_SENSOR = "marin_eager_steps"
PREFIX_ENV_VAR = "MARIN_PREFIX"
LOCATION_OP_NAME = "marin"  # the shared ops: marin__steps, marin__<partition set>


def load_error_asset(name: str, where: str, error: str) -> dg.AssetSpec:
    """The asset standing for a script that failed to load: its group's error, traceback included.

    Not materializable: a run of it would only record a failure, and a key with recorded events
    stays in the catalog without a definition once the script is fixed (see
    :func:`build_error_cleanup_sensor`). The description is plain text (the catalog shows it raw).
    """
    last = next((line for line in reversed(error.strip().splitlines()) if line.strip()), "failed to load")
    description = (
        f"Experiment script {where} failed to load: {last.strip()} (fix it, then Reload definitions)\n\n"
        f"{error[-20000:]}"
    )
    return dg.AssetSpec(
        key=dg.AssetKey([ERROR_PREFIX, name]),
        group_name=name,
        description=description,
        metadata={"marin/load_error": dg.MetadataValue.md(f"```\n{error[-20000:]}\n```"), "marin/script": where},
    )


def build_error_cleanup_sensor(error_keys: Sequence[dg.AssetKey], minimum_interval_seconds: int = 60):
    """A sensor (running by default) that removes from the instance every ``experiment_errors/*``
    asset the location no longer defines -- a script fixed since -- so the catalog never lists an
    error asset without a definition, also after a restart. Only those keys' records are wiped
    (an error asset has no history worth keeping); each tick is one query of the instance's keys."""
    current = set(error_keys)

    @dg.sensor(
        name=ERROR_CLEANUP_SENSOR,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Removes the error assets of scripts that load again (experiment_errors/<script>)",
    )
    def _cleanup(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        stale = [key for key in context.instance.get_asset_keys(prefix=[ERROR_PREFIX]) if key not in current]
        if not stale:
            return dg.SkipReason("no stale error asset")
        context.instance.wipe_assets(stale)
        names = ", ".join(key.to_user_string() for key in stale)
        context.log.info(f"removed the error assets of scripts that load again: {names}")
        return dg.SkipReason(f"removed {names}")

    return _cleanup


def build_automation_sensor(eager_keys: Sequence[dg.AssetKey], minimum_interval_seconds: int = 30):
    """The automation sensor of the steps experiments declare eager (``Experiment.eager_steps``),
    running by default: declaring a step eager is the switch, no sensor has to be turned on in the
    UI (Dagster's own ``default_automation_condition_sensor`` is stopped by default). Evaluated by
    the daemon; its runs are plain runs (no backfills) tagged ``marin/source=automation``."""
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.assets(*eager_keys),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=minimum_interval_seconds,
        emit_backfills=False,
        run_tags={SOURCE_TAG: "automation"},
        description="Materializes the eager steps (Experiment.eager_steps) when their inputs update",
    )


def storage_resource() -> MarinStorageResource:
    """The location's storage resource: ``$MARIN_PREFIX`` passed as an unresolved ``EnvVar`` (each
    run resolves it when it starts; never when the location loads), or -- when the location's
    environment has no ``MARIN_PREFIX`` -- no prefix (each run: ``$MARIN_PREFIX`` if it has one,
    else ``./data``). A run config ``resources: {marin_storage: {config: {prefix: ...}}}`` replaces
    either for one run."""
    if PREFIX_ENV_VAR in os.environ:  # only whether it is declared: its value is read by each run
        return MarinStorageResource(prefix=dg.EnvVar(PREFIX_ENV_VAR))
    return MarinStorageResource()


LandingWatch = tuple[LandingDrops, str, list[dg.AssetKey]]
"""A watched landing zone: its drops, the partition set they fill, the assets of one drop."""


@dataclass
class ExperimentDefinitions:
    """What one experiment adds to the code location."""

    members: list[StepAssetMember] = field(default_factory=list)
    jobs: list[dg.UnresolvedAssetJobDefinition] = field(default_factory=list)
    schedules: list[dg.ScheduleDefinition] = field(default_factory=list)
    sensors: list[dg.SensorDefinition] = field(default_factory=list)
    landing: list[LandingWatch] = field(default_factory=list)

    def extend(self, other: ExperimentDefinitions) -> None:
        for name in ("members", "jobs", "schedules", "sensors", "landing"):
            getattr(self, name).extend(getattr(other, name))


def _experiment_definitions(
    experiment: Experiment,
    graph: StepGraph | GraphView,
    keys: AssetKeys,
    partitions_defs: dict[str, dg.PartitionsDefinition],
    emitted: dict[dg.AssetKey, str],
    claimed_sources: dict[str, str],
    prefix: str,
    set_sources: dict[str, str] | None = None,
) -> ExperimentDefinitions:
    """Asset members, jobs, schedules, sensors and landing zones of one experiment (raises on a bad one).

    ``claimed_sources`` (landing source -> experiment watching it) and ``set_sources`` (partition
    set -> the landing source feeding it) are shared by the location's experiments (mutated): each
    source has one sensor, and a partition set holds the drops of one source only.
    """
    members = step_asset_members(experiment, partitions_defs, prefix, keys, graph, emitted)
    partition_sets = {m.partition_set for m in members if m.partition_set is not None}
    if len(partition_sets) > 1:
        raise ValueError(f"experiment {experiment.name} mixes partition sets {sorted(partition_sets)}")
    partitions_def = partitions_defs[partition_sets.pop()] if partition_sets else None
    parts = ExperimentDefinitions(members=members)
    if experiment.job:
        parts.jobs.append(
            dg.define_asset_job(
                f"{experiment.name}_job",
                selection=dg.AssetSelection.groups(experiment.name),
                partitions_def=partitions_def,
                description=experiment.description,
                tags={SOURCE_TAG: "dagster", "marin/experiment": experiment.name},
            )
        )
    _add_schedules(parts, experiment, graph, keys)
    _add_landing_zones(
        parts, experiment, graph, keys, partitions_defs, claimed_sources, {} if set_sources is None else set_sources
    )
    return parts


def _add_schedules(
    parts: ExperimentDefinitions, experiment: Experiment, graph: StepGraph | GraphView, keys: AssetKeys
) -> None:
    """A job and a schedule per ``StepSchedule`` of the experiment."""
    for step_schedule in experiment.schedules:
        # Only the listed steps; inputs that are not materialized (the caches of drops that
        # arrived since the last run) are brought along by the run itself (step_run._bring_inputs).
        scheduled = [keys.key_for(graph.resolved(s)) for s in step_schedule.steps if s.partitioned_by is None]
        scheduled_job = dg.define_asset_job(
            f"{step_schedule.name}_job",
            selection=dg.AssetSelection.assets(*scheduled),
            description=step_schedule.description,
            tags={SOURCE_TAG: "schedule", "marin/experiment": experiment.name},
        )
        parts.jobs.append(scheduled_job)
        parts.schedules.append(
            dg.ScheduleDefinition(
                name=step_schedule.name,
                job=scheduled_job,
                cron_schedule=step_schedule.cron,
                description=step_schedule.description,
                default_status=(
                    dg.DefaultScheduleStatus.RUNNING
                    if step_schedule.default_status == "running"
                    else dg.DefaultScheduleStatus.STOPPED
                ),
            )
        )


def _add_landing_zones(
    parts: ExperimentDefinitions,
    experiment: Experiment,
    graph: StepGraph | GraphView,
    keys: AssetKeys,
    partitions_defs: dict[str, dg.PartitionsDefinition],
    claimed_sources: dict[str, str],
    set_sources: dict[str, str],
) -> None:
    """The drop job and landing sensor of each landing zone the experiment declares as a partition
    set's source (and no earlier experiment watches), and the lineage edge to its raw asset.

    A new drop there adds a partition and runs every asset of that drop (raw -> ... -> consolidated)
    in one run; partition-free inputs (the classifier) come along with the first run that finds
    them missing. Steps that read every drop (training) are not in it: a schedule or an explicit
    request runs them.
    """
    partitioned = [n.step for n in graph.topological() if n.partitioned_by is not None]
    declared = {**declared_partition_sources(partitioned), **experiment.partitions}
    for set_name, drops in sorted(declared.items()):
        definition = partitions_defs.get(set_name)
        if not isinstance(drops, LandingDrops) or not isinstance(definition, dg.DynamicPartitionsDefinition):
            continue
        source = drops.source
        owner = set_sources.get(set_name)
        if owner is not None and owner != source:
            raise ValueError(
                f"partition set {set_name!r} holds the drops of landing source {owner!r} already; "
                f"{drops.landing_dir!r} needs a set of its own (e.g. curation_steps(..., partition_set=...))"
            )
        # The lineage edge landing/<source> -> the steps reading it (their raw asset).
        readers = {keys.key_for(n) for n in graph.topological() if n.step.partition_source == drops}
        for member in parts.members:
            if member.spec.key in readers:
                member.spec = member.spec.merge_attributes(deps=[dg.AssetDep(landing_key(source))])
        if source in claimed_sources:
            continue
        local_keys = [keys.key_for(n) for n in partition_local_steps(graph, set_name)]
        drop_job = dg.define_asset_job(
            f"{experiment.name}_drop_job",
            selection=dg.AssetSelection.assets(*local_keys),
            partitions_def=definition,
            description=f"Every {experiment.name} asset of one drop of landing/{source} (the landing sensor "
            "starts it for each new drop)",
            # No marin/source here: a run the UI launches is not the sensor's (its runs carry
            # dagster/sensor_name).
            tags={"marin/curation": source, "marin/experiment": experiment.name},
        )
        parts.jobs.append(drop_job)
        parts.sensors.append(
            build_landing_sensor(
                drop_job,
                definition,
                source=source,
                landing_dir=drops.landing_dir,
                processed_keys=local_keys,
            )
        )
        claimed_sources[source] = experiment.name
        set_sources[set_name] = source
        parts.landing.append((drops, set_name, local_keys))


def _location_ops(
    experiment_list: Sequence[Experiment],
    members: list[StepAssetMember],
    partitions_defs: dict[str, dg.PartitionsDefinition],
    errors: list[tuple[str, str, str]],
    isolate: bool,
) -> list[dg.AssetsDefinition]:
    """Every experiment's assets in shared ops (``marin__steps``, ``marin__<partition set>``).

    Should Dagster reject the shared ops, each experiment is tried in ops of its own so that only
    the one at fault becomes its group's error (with ``isolate``; else the error propagates).
    """
    try:
        return assemble_step_ops(members, LOCATION_OP_NAME, partitions_defs)
    except Exception:  # noqa: BLE001 - find the experiment at fault below
        if not isolate:
            raise
    ops: list[dg.AssetsDefinition] = []
    for experiment in experiment_list:
        own = [m for m in members if m.spec.group_name == experiment.name]
        try:
            ops.extend(assemble_step_ops(own, experiment.name, partitions_defs))
        except Exception:  # noqa: BLE001
            errors.append((experiment.name, experiment.name, traceback.format_exc()))
    return ops


def build_definitions(
    experiment_list: Sequence[Experiment] | None = None, scripts: Sequence[Script] | None = None
) -> dg.Definitions:
    """Assets, jobs and resources of ``experiment_list``, or of the discovered ``scripts``
    (default: :func:`~marin_assets.execution.discovery.discover`)."""
    errors: list[tuple[str, str, str]] = []  # (group, where, traceback or hint)
    if experiment_list is None:
        scripts = discover() if scripts is None else scripts
        experiment_list = [s.experiment for s in scripts if s.experiment is not None]
        errors = [(s.name, s.path or s.module, s.error or "") for s in scripts if s.experiment is None]
    prefix = default_prefix()
    built = location_graphs(experiment_list, prefix)
    for experiment, outcome in zip(experiment_list, built, strict=True):
        if isinstance(outcome, Exception):  # a script whose steps do not resolve is its group's error
            error = "".join(traceback.format_exception(outcome))
            errors.append((experiment.name, experiment.name, error))
            logger.error("experiment %s does not build: %s", experiment.name, outcome)
    graphs = [None if isinstance(g, Exception) else g for g in built]
    keys = location_asset_keys(experiment_list, graphs, scripts)
    partitions_defs: dict[str, dg.PartitionsDefinition] = {}
    emitted: dict[dg.AssetKey, str] = {}
    claimed_sources: dict[str, str] = {}
    set_sources: dict[str, str] = {}
    location = ExperimentDefinitions()
    assets: list[dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset | dg.AssetChecksDefinition] = []
    for experiment, graph in zip(experiment_list, graphs, strict=True):
        if graph is None:
            continue
        before = dict(emitted)
        try:
            parts = _experiment_definitions(
                experiment, graph, keys, partitions_defs, emitted, claimed_sources, prefix, set_sources
            )
        except Exception:  # noqa: BLE001 - isolate: every other group still loads
            if scripts is None:
                raise  # an explicit list (tests, custom locations): fail loudly as before
            emitted.clear()
            emitted.update(before)
            errors.append((experiment.name, experiment.name, traceback.format_exc()))
            continue
        location.extend(parts)
    assets.extend(
        _location_ops(experiment_list, location.members, partitions_defs, errors, isolate=scripts is not None)
    )
    jobs: list[dg.UnresolvedAssetJobDefinition | dg.JobDefinition] = [*location.jobs]
    sensors, landing = location.sensors, location.landing
    for name, where, error in errors:
        assets.append(load_error_asset(name, where, error))
    sensors.append(build_error_cleanup_sensor([dg.AssetKey([ERROR_PREFIX, name]) for name, _, _ in errors]))
    eager_keys = sorted(
        {
            keys.key_for(graph.resolved(step))
            for experiment, graph in zip(experiment_list, graphs, strict=True)
            if graph is not None and experiment.name not in {name for name, _, _ in errors}
            for step in experiment.eager_steps
        },
        key=lambda key: key.to_user_string(),
    )
    if eager_keys:
        sensors.append(build_automation_sensor(eager_keys))
    jobs.extend(MAINTENANCE_JOBS)  # invalidate / gc: dry runs unless configured with apply: true
    set_names = [name for name, d in partitions_defs.items() if isinstance(d, dg.DynamicPartitionsDefinition)]
    if set_names:
        # What a new drop changes shows without a reload: see dagster_bridge/partition_sets.py.
        sensors.append(build_partition_set_sensor(set_names))
    if landing:
        # The drops of each watched landing zone, with their status, as an observable asset.
        assets.extend(landing_zone_asset(drops, set_name, local) for drops, set_name, local in landing)
        assets.extend(
            check for drops, _, _ in landing for check in landing_zone_checks(drops)
        )  # changed / failed drops
        sensors.append(build_landing_status_sensor(landing))
    return dg.Definitions(
        assets=[*assets, *partition_set_assets(set_names)],
        jobs=jobs,
        sensors=sensors,
        schedules=location.schedules,
        resources={"marin_storage": storage_resource(), "ray": RayResource()},
        executor=RUN_EXECUTOR,
    )


__all__ = ["asset_key_for", "build_definitions", "load_error_asset", "storage_resource"]
