"""Progress lines of a running step (training and evaluation subprocesses) as the Dagster run's logs.

The step engine reports them to the ``marin.progress`` logger
(:func:`marin_resources.ray_cluster.report_progress`): in this process when the step runs here, or
through the driver, which logs the lines its Ray tasks print (``forward_worker_progress``). While a
step's materialization runs, a handler on that logger writes each line to the run's log.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from marin_resources.ray_cluster import PROGRESS_LOGGER

F = TypeVar("F", bound=Callable[..., Any])


class _RunLogHandler(logging.Handler):
    """Writes ``marin.progress`` records to a Dagster run's log (``context.log``)."""

    def __init__(self, run_log: Any) -> None:
        super().__init__(logging.INFO)
        self.run_log = run_log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.run_log.info(record.getMessage())
        except Exception:  # noqa: BLE001 - a progress line must never fail the step
            self.handleError(record)


@contextlib.contextmanager
def progress_in_run_logs(run_log: Any) -> Iterator[None]:
    """While the block runs, every ``marin.progress`` line is an info line of ``run_log``."""
    logger = logging.getLogger(PROGRESS_LOGGER)
    handler = _RunLogHandler(run_log)
    level = logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def with_progress_logs(compute: F) -> F:
    """``compute(context, ...)`` with the step's progress lines in ``context.log``."""

    @functools.wraps(compute)
    def run(context: Any, *args: Any, **kwargs: Any) -> Any:
        with progress_in_run_logs(context.log):
            return compute(context, *args, **kwargs)

    return run  # type: ignore[return-value]
