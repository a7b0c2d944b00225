"""The command line's listener of the run's stream: the units' lines and progress lines on the console.

``executor_main`` (and Marin's ``Executor``) passes a :class:`ConsoleProgress` in its options'
listeners; it is the only writer of these lines -- the engine itself logs none of them, so a run
without it (``run_steps``, the Dagster op, which writes its own) prints no unit line.

* The units' own lines, records of the ``marin.executor`` logger (the engine's: the run's log file
  keeps them, the quickstart turns them into its ``done`` / ``FAILED`` lines), one per event:
  ``<unit>: running <fn> -> <output> (attempt <id>)`` (:class:`~marin_assets.execution.events.Started`),
  ``<unit>: SUCCESS in <s>s`` (:class:`~marin_assets.execution.events.Done` of a unit that ran; a
  cached one or one another runner computed says nothing), ``<unit>: FAILED after <s>s: <cause>``
  (ERROR; :class:`~marin_assets.execution.events.Failed`: the function's error message as it raised
  it, or the last line of why the unit could not run). A unit not run because an input failed
  (:class:`~marin_assets.execution.events.NotRun`) has no line: the run's closing error names the
  failed ones. A step run on a Ray worker is started and ended by this driver, so its lines come
  once, from here.
* Each :class:`~marin_assets.execution.events.Progress` line a step reports (a training step, an
  lm-eval row) becomes one record of the ``marin.progress`` logger, at most one per reported step:
  every ``every_steps``-th step (by the line's ``step`` metric), and no more often than every
  ``every_s`` seconds per unit (``$MARIN_PROGRESS_EVERY``: ``10``, ``30s`` or ``10,30s``; unset:
  every reported step). Lines without a step number (lm-eval rows) always pass. The step's printed
  output is not repeated here: it reached the console when it was printed (in this process, or once
  through the driver from a Ray worker).
"""

from __future__ import annotations

import logging
import os
import threading

from marin_assets.execution.events import Done, Failed, Progress, Started, StepEvent
from marin_resources.progress import PROGRESS_LOGGER

UNIT_LOGGER = "marin.executor"  # the engine's logger: handlers and filters of the engine's lines apply


class ConsoleProgress:
    """Logs the units' lines and the run's progress lines (see the module docstring); thread-safe."""

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
        self._units = logging.getLogger(UNIT_LOGGER)

    def __call__(self, event: StepEvent) -> None:
        if isinstance(event, Progress):
            if event.stream == "progress" and self._due(event):
                self._logger.info(event.message)
        elif isinstance(event, Started):
            fn = f" {event.fn}" if event.fn else ""
            attempt = f" (attempt {event.attempt})" if event.attempt else ""
            self._units.info("%s: running%s -> %s%s", event.label, fn, event.output_path, attempt)
        elif isinstance(event, Done):
            if event.action == "ran":
                self._units.info("%s: SUCCESS in %.1fs", event.label, event.seconds)
        elif isinstance(event, Failed):
            self._units.error("%s: FAILED after %.1fs: %s", event.label, event.seconds, failure_text(event))

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


def failure_text(event: Failed) -> str:
    """What the console says after ``FAILED after <s>s:``: a function that raised, its error message
    whole (the attempt's error is ``<unit> failed: <message>``: a training step's names its log and
    quotes its tail); else the cause (the error's last line) without the unit's name in front."""
    own = f"{event.label} failed: "
    if event.error.startswith(own):
        return event.error[len(own) :]
    cause = event.cause.strip() or event.error.strip() or "unknown error"
    for prefix in (own, f"{event.label}: "):
        if cause.startswith(prefix):
            return cause[len(prefix) :]
    return cause


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
