"""Dagster glue: steps as assets, command-line runs recorded in the instance, Definitions.

Glue only: stage logic lives in the stage packages, the engine in ``marin_assets.execution``. One
asset per step, keyed by the step name, its code version the step's hash, its deps the step's inputs,
its group the experiment. Materializing runs the steps through the same engine as ``executor_main``
(same status and lease files), so the UI and the command line never disagree. The parts, one job each:

* :mod:`~marin_assets.dagster_bridge.location_graph`: asset keys and the location's graph;
* :mod:`~marin_assets.dagster_bridge.step_specs`: what the catalog shows before a run (specs,
  checks, definition metadata);
* :mod:`~marin_assets.dagster_bridge.step_ops`: the ops that hold the assets (one subsettable op
  per partition set) and receive the storage and Ray resources;
* :mod:`~marin_assets.dagster_bridge.step_run`: a run of the selected steps, scheduled as
  ``executor_main`` schedules them, and the events it records;
* :mod:`~marin_assets.dagster_bridge.step_failures`: how failed steps read (cause first).

Import each name from the module that owns it; this package re-exports nothing.
"""
