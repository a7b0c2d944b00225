"""Dagster glue: steps as assets, command-line runs recorded in the instance, Definitions.

Glue only: stage logic lives in the stage packages, the engine in ``marin_assets.execution``.
"""

from marin_assets.dagster_bridge.assets import Experiment, asset_key_for, build_step_assets
from marin_assets.dagster_bridge.metadata import to_dagster_metadata

__all__ = ["Experiment", "asset_key_for", "build_step_assets", "to_dagster_metadata"]
