"""Progress lines of running steps (training and evaluation) as the Dagster run's log lines.

The step engine delivers each progress line in the process that runs the steps -- from the step's
own thread, or from a Ray worker on any node through the driver's relay (public Ray API; see
:mod:`marin_resources.progress`). While a step op's compute runs, :func:`with_progress_logs`
subscribes a listener that writes each line to ``context.log``, and names the Dagster run in the Ray
dashboard's job list (the driver's job entrypoint). The lines' summary (the last line, their number)
reaches the materialization through the step's metadata (``marin/progress``, ``marin/progress_lines``).
No Ray or Dagster private API.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from marin_resources.progress import ProgressEvent, progress_sink
from marin_resources.ray_jobs import describe_driver

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger(__name__)


@contextlib.contextmanager
def progress_in_run_logs(run_log: Any) -> Iterator[None]:
    """While the block runs, every progress line delivered in this process is an info line of
    ``run_log`` (``<step>: <line>`` when it has a step, like the op's own per-step lines, so the
    run page's log filter on a step's name shows its progress too)."""

    def write(event: ProgressEvent) -> None:
        run_log.info(f"{event.step}: {event.line}" if event.step else event.line)

    with progress_sink(write):
        yield


def _name_run_for_ray(context: Any) -> None:
    """The Ray dashboard's job list names this Dagster run, not the process's command line."""
    run_id = getattr(context, "run_id", None)
    if not run_id:
        return
    job = getattr(context, "job_name", None) or ""
    describe_driver(
        f"dagster run {run_id}" + (f" ({job})" if job else ""),
        f"the Ray tasks of Dagster run {run_id}" + (f", job {job}" if job else ""),
    )


def with_progress_logs(compute: F) -> F:
    """``compute(context, ...)`` with the steps' progress lines in ``context.log``."""

    @functools.wraps(compute)
    def run(context: Any, *args: Any, **kwargs: Any) -> Any:
        _name_run_for_ray(context)
        with progress_in_run_logs(context.log):
            return compute(context, *args, **kwargs)

    return run  # type: ignore[return-value]
