"""The command line's listener of the run's stream: progress lines on the console, at a cadence.

``executor_main`` passes a :class:`ConsoleProgress` in its options' listeners. Each
:class:`~marin_assets.execution.events.Progress` line a step reports (a training step, an lm-eval
row) becomes one record of the ``marin.progress`` logger -- the console shows it, the run's log file
keeps it -- at most one per reported step: every ``every_steps``-th step (by the line's ``step``
metric), and no more often than every ``every_s`` seconds per unit (``$MARIN_PROGRESS_EVERY``:
``10``, ``30s`` or ``10,30s``; unset: every reported step). Lines without a step number
(lm-eval rows) always pass. The step's printed output is not repeated here: it reached the console
when it was printed (in this process, or once through the driver from a Ray worker). The units'
own lines (``running``, ``SUCCESS in``, ``FAILED after``) are the attempt's records of the
``marin.executor`` logger.
"""

from __future__ import annotations

import logging
import os
import threading

from marin_assets.execution.events import Progress, StepEvent
from marin_resources.progress import PROGRESS_LOGGER


class ConsoleProgress:
    """Logs the run's progress lines (see the module docstring); thread-safe."""

    def __init__(self, every_steps: int = 1, every_s: float = 0.0) -> None:
        if every_steps < 1:
            raise ValueError(f"progress cadence: every_steps must be at least 1, got {every_steps}")
        if every_s < 0:
            raise ValueError(f"progress cadence: every_s must not be negative, got {every_s}")
        self.every_steps = every_steps
        self.every_s = every_s
        self._shown_at: dict[str, float] = {}  # by output path: versions of one step share a name
        self._lock = threading.Lock()
        self._logger = logging.getLogger(PROGRESS_LOGGER)

    def __call__(self, event: StepEvent) -> None:
        if not isinstance(event, Progress) or event.stream != "progress" or not self._due(event):
            return
        self._logger.info(event.message)

    def _due(self, event: Progress) -> bool:
        step = event.metrics.get("step")
        if step is None:
            return True
        if int(step) % self.every_steps != 0:
            return False
        if not self.every_s:
            return True
        unit = event.output_path
        with self._lock:
            last = self._shown_at.get(unit)
            if last is not None and event.at - last < self.every_s:
                return False
            self._shown_at[unit] = event.at
        return True


def progress_cadence_from_env() -> ConsoleProgress:
    """The console's cadence from ``$MARIN_PROGRESS_EVERY``: ``N`` (every N-th step), ``Ns`` (at most
    one line per N seconds), or both (``10,30s``); unset: every reported step."""
    text = os.environ.get(PROGRESS_EVERY_ENV, "").strip()
    every_steps, every_s = 1, 0.0
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            if part.endswith("s"):
                every_s = float(part[:-1])
            else:
                every_steps = int(part)
        except ValueError:
            raise ValueError(
                f"${PROGRESS_EVERY_ENV}={text!r}: expected N (every N-th step), Ns (seconds) or both, e.g. 10,30s"
            ) from None
    return ConsoleProgress(every_steps, every_s)


PROGRESS_EVERY_ENV = "MARIN_PROGRESS_EVERY"
