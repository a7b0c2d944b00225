"""Experiments: what a script declares and where scripts come from, under one name (no Dagster import).

Kept for imports written before the split: declarations (:class:`Experiment`, :class:`StepCheck`,
:class:`StepSchedule`, partition sources) live in :mod:`marin_assets.execution.declarations`, script
discovery in :mod:`marin_assets.execution.discovery`, walks over step configs in
:mod:`marin_assets.execution.step_walk`. Nothing in the package imports this module.
"""

from marin_assets.execution.declarations import (
    Experiment,
    StepCheck,
    StepSchedule,
    declared_partition_sources,
    partition_sources,
)
from marin_assets.execution.discovery import (
    DECLARATION,
    ENV_VAR,
    MAIN_ONLY_HINT,
    Script,
    discover,
    discovered_experiments,
    experiment_entries,
    experiment_of_module,
    project_root,
    script_of_file,
)
from marin_assets.execution.step import PartitionSource
from marin_assets.execution.step_walk import direct_dependencies, root_steps, steps_in, walk_steps

__all__ = [
    "DECLARATION",
    "ENV_VAR",
    "MAIN_ONLY_HINT",
    "Experiment",
    "PartitionSource",
    "Script",
    "StepCheck",
    "StepSchedule",
    "declared_partition_sources",
    "direct_dependencies",
    "discover",
    "discovered_experiments",
    "experiment_entries",
    "experiment_of_module",
    "partition_sources",
    "project_root",
    "root_steps",
    "script_of_file",
    "steps_in",
    "walk_steps",
]
