"""Experiment records for runs launched from Dagster (UI materializations, sensors, schedules, backfills).

``executor_main`` writes ``<prefix>/experiments/<script>-<hash>.json`` before it runs: each step's
name, output path, version and dependencies. The data browser (``marin_assets.browse``) reads
these records to relate a curation output to its input, its attribute outputs and the filter that
removed a document, and ``invalidate``/``gc`` read them to find descendants and referenced outputs.
A run launched from Dagster writes the same record for the experiment of each asset it
materializes (once per run and experiment in a process), so what the browser explains does not
depend on what launched the step. A Dagster run that only records a command-line run writes
none: ``executor_main`` already wrote its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from marin_assets.dagster_bridge.unit_run import is_explicit_request
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.executor_main import write_experiment_record
from marin_assets.execution.versioning import StepGraph

logger = logging.getLogger("marin.executor")

_LOCK = threading.Lock()
_WRITTEN: set[tuple[str, str, str]] = set()


def record_dagster_run(
    graph: StepGraph, experiment: Experiment, run_id: str, run_tags: Mapping[str, str]
) -> str | None:
    """Write the experiment record of ``graph`` for this Dagster run; returns its path (None when
    this run needs none or this process already wrote it)."""
    if not is_explicit_request(run_tags):
        return None
    name = experiment.name or "dagster"
    key = (run_id, name, graph.prefix)
    with _LOCK:
        if key in _WRITTEN:
            return None
        _WRITTEN.add(key)
    # The record is named after the experiment, as executor_main names it after its script: a
    # script's command-line run and its Dagster runs update one record.
    path = write_experiment_record(graph, experiment.description, f"{name}.py", run_id)
    logger.debug("experiment record of Dagster run %s: %s", run_id, path)
    return path
