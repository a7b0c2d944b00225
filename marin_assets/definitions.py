"""The Dagster ``Definitions`` of the marin-dagster code location.

Every experiment registered in :data:`EXPERIMENTS` becomes an asset group (one asset per step)
and an asset job ``<experiment>_job``. Resources come from ``marin_resources``: the storage root
(``$MARIN_PREFIX`` or ``./data``) and Ray (``$RAY_ADDRESS`` or an embedded local Ray).
"""

from __future__ import annotations

import dagster as dg
from marin_resources.dagster_resources import MarinStorageResource, RayResource

from marin_assets.dagster_bridge.assets import Experiment, build_step_assets
from marin_assets.experiments import hello_world


def experiments() -> list[Experiment]:
    """The experiments this code location shows."""
    return [
        Experiment(name="hello_world", steps=hello_world.STEPS, description="Numbers and their statistics"),
    ]


def build_definitions(experiment_list: list[Experiment] | None = None) -> dg.Definitions:
    """Assets, jobs and resources for ``experiment_list`` (default: :func:`experiments`)."""
    partitions_defs: dict[str, dg.PartitionsDefinition] = {}
    assets: list[dg.AssetsDefinition] = []
    jobs = []
    for experiment in experiment_list if experiment_list is not None else experiments():
        group_assets = build_step_assets(experiment, partitions_defs)
        assets.extend(group_assets)
        jobs.append(
            dg.define_asset_job(
                f"{experiment.name}_job",
                selection=dg.AssetSelection.groups(experiment.name),
                description=experiment.description,
            )
        )
    return dg.Definitions(
        assets=assets,
        jobs=jobs,
        resources={
            "marin_storage": MarinStorageResource(prefix=dg.EnvVar("MARIN_PREFIX").get_value() or None),
            "ray": RayResource(),
        },
    )
