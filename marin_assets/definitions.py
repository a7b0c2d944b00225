"""The Dagster ``Definitions`` of the marin-dagster code location.

Every experiment registered in :data:`EXPERIMENTS` becomes an asset group (one asset per step)
and an asset job ``<experiment>_job``. Resources come from ``marin_resources``: the storage root
(``$MARIN_PREFIX`` or ``./data``) and Ray (``$RAY_ADDRESS`` or an embedded local Ray).
"""

from __future__ import annotations

import dagster as dg

from marin_assets.dagster_bridge.assets import (
    SOURCE_TAG,
    Experiment,
    asset_key_for,
    build_step_assets,
    partition_local_steps,
)
from marin_assets.dagster_bridge.maintenance_jobs import MAINTENANCE_JOBS
from marin_assets.dagster_bridge.partition_sets import build_partition_set_sensor, partition_set_assets
from marin_assets.execution.executor_main import default_prefix
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments import curation, hello_world, quickstart
from marin_assets.landing.sensor import build_landing_sensor
from marin_resources.dagster_resources import MarinStorageResource, RayResource


def experiments() -> list[Experiment]:
    """The experiments this code location shows."""
    return [
        Experiment(name="hello_world", steps=hello_world.STEPS, description="Numbers and their statistics"),
        Experiment(
            name="curation",
            steps=list(curation.STEPS.values()),
            description="Sample HTML drops: raw -> text -> quality -> dedup -> consolidated",
            partitions=curation.PARTITIONS,
            checks=curation.build_checks(curation.STEPS),
        ),
        Experiment(
            name="quickstart",
            steps=[quickstart.STEPS["evaluation"]],
            description="Curated drops -> tokenizer -> Levanter caches -> tiny Llama -> evaluation",
            partitions=quickstart.PARTITIONS,
            schedules=quickstart.schedules(quickstart.STEPS),
        ),
    ]


def build_definitions(experiment_list: list[Experiment] | None = None) -> dg.Definitions:
    """Assets, jobs and resources for ``experiment_list`` (default: :func:`experiments`)."""
    partitions_defs: dict[str, dg.PartitionsDefinition] = {}
    assets: list[dg.AssetsDefinition] = []
    jobs = []
    experiment_list = experiment_list if experiment_list is not None else experiments()
    emitted: dict[dg.AssetKey, str] = {}
    sensors: list[dg.SensorDefinition] = []
    schedules: list[dg.ScheduleDefinition] = []
    for experiment in experiment_list:
        group_assets = build_step_assets(experiment, partitions_defs, emitted=emitted)
        assets.extend(group_assets)
        partition_sets = {
            a.partitions_def.name for a in group_assets if isinstance(a.partitions_def, dg.DynamicPartitionsDefinition)
        }
        if len(partition_sets) > 1:
            raise ValueError(f"experiment {experiment.name} mixes partition sets {sorted(partition_sets)}")
        partitions_def = partitions_defs[partition_sets.pop()] if partition_sets else None
        job = dg.define_asset_job(
            f"{experiment.name}_job",
            selection=dg.AssetSelection.groups(experiment.name),
            partitions_def=partitions_def,
            description=experiment.description,
            tags={SOURCE_TAG: "dagster", "marin/experiment": experiment.name},
        )
        jobs.append(job)
        for step_schedule in experiment.schedules:
            # Only the listed steps; inputs that are not materialized (the caches of drops that
            # arrived since the last run) are brought along by the run itself (unit_run.bring_inputs).
            keys = [asset_key_for(s.name) for s in step_schedule.steps if s.partitioned_by is None]
            scheduled_job = dg.define_asset_job(
                f"{step_schedule.name}_job",
                selection=dg.AssetSelection.assets(*keys),
                description=step_schedule.description,
                tags={SOURCE_TAG: "schedule", "marin/experiment": experiment.name},
            )
            jobs.append(scheduled_job)
            schedules.append(
                dg.ScheduleDefinition(
                    name=step_schedule.name,
                    job=scheduled_job,
                    cron_schedule=step_schedule.cron,
                    description=step_schedule.description,
                    default_status=dg.DefaultScheduleStatus.STOPPED,
                )
            )
        if experiment.name == "curation" and isinstance(partitions_def, dg.DynamicPartitionsDefinition):
            # A new drop: the sensor adds the partition and runs every asset of that drop (raw ->
            # text -> quality -> dedup -> consolidated) in one run; the partition-free classifier
            # they need is brought along by the first run that finds it missing. Steps that read
            # every drop (training) are not in it: a schedule or an explicit request runs them.
            graph = StepGraph(experiment.steps, "/")
            local_keys = [asset_key_for(n.asset_name) for n in partition_local_steps(graph, partitions_def.name)]
            drop_job = dg.define_asset_job(
                f"{experiment.name}_drop_job",
                selection=dg.AssetSelection.assets(*local_keys),
                partitions_def=partitions_def,
                description="Every curation asset of one new drop (started by the landing sensor)",
                tags={
                    "marin/curation": curation.SOURCE,
                    SOURCE_TAG: "landing_sensor",
                    "marin/experiment": experiment.name,
                },
            )
            jobs.append(drop_job)
            sensors.append(build_landing_sensor(drop_job, partitions_def, default_prefix, source=curation.SOURCE))
    jobs.extend(MAINTENANCE_JOBS)  # invalidate / gc: dry runs unless configured with apply: true
    set_names = [name for name, d in partitions_defs.items() if isinstance(d, dg.DynamicPartitionsDefinition)]
    if set_names:
        # What a new drop changes shows without a reload: see dagster_bridge/partition_sets.py.
        sensors.append(build_partition_set_sensor(set_names))
    return dg.Definitions(
        assets=[*assets, *partition_set_assets(set_names)],
        jobs=jobs,
        sensors=sensors,
        schedules=schedules,
        resources={
            "marin_storage": MarinStorageResource(prefix=dg.EnvVar("MARIN_PREFIX").get_value() or None),
            "ray": RayResource(),
        },
    )
