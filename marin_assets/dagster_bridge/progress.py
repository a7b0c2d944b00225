"""How a Dagster run is named where its steps run: in Ray's job list.

The op (:mod:`marin_assets.dagster_bridge.step_run`) hands :func:`run_description` to the engine as
the run's identity (``ExecutorOptions.description``); the engine names this driver's Ray job after it
(``marin_resources.ray_jobs.describe_driver``) before the first step starts, and each Ray task is
named after its step. The steps' progress lines and printed output reach the run's event log as
events of the engine's stream (``Progress``), which the op writes under each step's name.
"""

from __future__ import annotations

from collections.abc import Sequence


def run_description(run_id: str, job_name: str | None, steps: Sequence[str]) -> str:
    """``dagster run <run id> (<job>, step <name>)`` -- or ``<n> steps`` when the op runs several --
    as Ray's job list shows the driver of this run."""
    parts = [job_name] if job_name else []
    if len(steps) == 1:
        parts.append(f"step {steps[0]}")
    elif steps:
        parts.append(f"{len(steps)} steps")
    return f"dagster run {run_id}" + (f" ({', '.join(parts)})" if parts else "")
