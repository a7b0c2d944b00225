"""Marin's ``marin.execution.executor`` module under its own name (no Dagster import).

A Marin experiment script imports from ``marin.execution.executor``; with the import mapping
``marin.`` -> ``marin_assets.`` it imports this module and finds the same names with the same
arguments and behaviour: ``ExecutorStep``, ``InputName``, ``OutputName``, ``VersionedValue``,
``versioned``, ``ensure_versioned``, ``unwrap_versioned_value``, ``output_path_of``,
``this_output_path``, ``THIS_OUTPUT_PATH``, ``get_executor_step``, ``ExecutorMainConfig``,
``executor_main`` and ``Executor`` (Marin's constructor and ``run`` signature). The engine itself
lives in ``step``, ``versioning``, ``runner`` and ``executor_main``; this module only maps names.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from marin_assets.execution.console import progress_cadence_from_env
from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.executor_main import ExecutorMainConfig, executor_main, write_experiment_record
from marin_assets.execution.outcomes import ExecutionReport, ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.step import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    InputName,
    OutputName,
    VersionedValue,
    ensure_versioned,
    output_path_of,
    this_output_path,
    unwrap_versioned_value,
    versioned,
)
from marin_assets.execution.storage import join_path
from marin_assets.execution.units import select_units
from marin_assets.execution.versioning import StepGraph

logger = logging.getLogger("marin.executor")

__all__ = [
    "THIS_OUTPUT_PATH",
    "Executor",
    "ExecutorMainConfig",
    "ExecutorStep",
    "InputName",
    "OutputName",
    "VersionedValue",
    "ensure_versioned",
    "executor_main",
    "get_executor_step",
    "output_path_of",
    "this_output_path",
    "unwrap_versioned_value",
    "versioned",
]


def get_executor_step(run: ExecutorStep | InputName) -> ExecutorStep:
    """The step behind ``run`` (a step, or an ``InputName`` of one); a hardcoded path raises ValueError."""
    if isinstance(run, ExecutorStep):
        return run
    if isinstance(run, InputName):
        if run.step is None:
            raise ValueError(f"Hardcoded path {run.name} is not part of the pipeline")
        return run.step
    raise ValueError(f"Unexpected type {type(run)} for run: {run}")


class Executor:
    """Marin's ``Executor(prefix, executor_info_base_path, description).run(steps, ...)``.

    The only ``Executor`` in the engine: it resolves the graph, writes the experiment record and
    hands the graph to :class:`~marin_assets.execution.runner.StepRunner`, which runs the units.

    After ``run``, ``output_paths`` and ``versions`` map each given step object to its output path
    and version dict, as Marin's attributes do.
    """

    def __init__(self, prefix: str, executor_info_base_path: str | None = None, description: str | None = None):
        self.prefix = prefix
        self.executor_info_base_path = executor_info_base_path or join_path(prefix, "experiments")
        self.description = description
        self.output_paths: dict[ExecutorStep, str] = {}
        self.versions: dict[ExecutorStep, dict[str, Any]] = {}
        self.executor_info_path: str | None = None

    def compute_graph(self, steps: Sequence[ExecutorStep | InputName]) -> StepGraph:
        """Versions and output paths of ``steps`` and everything they reference."""
        graph = StepGraph(steps, self.prefix)
        for step in graph.step_objects():  # steps merged into an identical one share its path
            self.output_paths[step] = graph.resolved(step).output_path
            self.versions[step] = graph.resolved(step).version
        return graph

    def run(
        self,
        steps: Sequence[ExecutorStep | InputName],
        *,
        dry_run: bool = False,
        run_only: list[str] | None = None,
        force_run_failed: bool = True,
        max_concurrent: int | None = None,
    ) -> ExecutionReport | None:
        """Run ``steps`` (or only print the plan when ``dry_run``); raises ExecutorError on failures."""
        graph = self.compute_graph(steps)
        if dry_run:
            print(format_plan(plan(graph, run_only, force_run_failed)))
            return None
        frame = inspect.currentframe()
        caller = frame.f_back.f_code.co_filename if frame is not None and frame.f_back is not None else sys.argv[0]
        options = ExecutorOptions(
            force_run_failed=force_run_failed,
            max_concurrent=max_concurrent or max(1, len(select_units(graph))),
            description=f"Executor {os.path.splitext(os.path.basename(caller))[0]}",
            listeners=(progress_cadence_from_env(),),  # unit and progress lines on the console, as executor_main
        )
        self.executor_info_path = write_experiment_record(
            graph, self.description, caller, options.run_id, self.executor_info_base_path
        )
        return StepRunner(options).run(graph, run_only)
