"""Turn executor steps into Dagster software-defined assets: the bridge's public names.

One asset per step, keyed by the step name, its code version the step's hash, its deps the step's
inputs, its group the experiment. Materializing runs the steps through the same engine as
``executor_main`` (same status and lease files), so the UI and the command line never disagree.
The parts, one job each:

* :mod:`~marin_assets.dagster_bridge.step_specs`: what the catalog shows before a run (specs,
  checks, definition metadata);
* :mod:`~marin_assets.dagster_bridge.step_ops`: the ops that hold the assets (one subsettable op
  per partition set) and receive the storage and Ray resources;
* :mod:`~marin_assets.dagster_bridge.step_run`: a run of the selected steps, scheduled as
  ``executor_main`` schedules them, and the events it records;
* :mod:`~marin_assets.dagster_bridge.step_failures`: how failed steps read (cause first).

This module is glue only: no stage logic lives here.
"""

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.step_ops import assemble_step_ops, build_step_assets
from marin_assets.dagster_bridge.step_run import MAX_CONCURRENT_TAG, RUN_ID_TAG
from marin_assets.dagster_bridge.step_specs import StepAssetMember, StepTarget, step_asset_members
from marin_assets.dagster_bridge.unit_run import SOURCE_TAG
from marin_assets.execution.declarations import Experiment, StepCheck, StepSchedule

__all__ = [
    "MAX_CONCURRENT_TAG",
    "RUN_ID_TAG",
    "SOURCE_TAG",
    "Experiment",
    "StepAssetMember",
    "StepCheck",
    "StepSchedule",
    "StepTarget",
    "asset_key_for",
    "assemble_step_ops",
    "build_step_assets",
    "step_asset_members",
]
