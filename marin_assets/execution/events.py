"""The engine's one event stream: what happens to each unit of a run, told to listeners passed in.

The scheduler and the runner emit these events; every front end reads them and nothing else: the
console (``executor_main``'s lines per unit and progress lines), the Dagster op (its per-step log lines,
observations and materializations), the command-line recorder, the Ray progress channel (a
step's progress lines from a Ray worker arrive here as :class:`Progress`). A listener is any
callable taking one event; listeners are passed in (``ExecutorOptions.listeners``), never
registered globally, and are called in the thread that emits the event. A listener that raises is
logged and the run goes on: a broken front end never fails a step.

Every event names its unit (``step``, ``partition``, ``output_path``) and carries ``at``, the wall
time it was emitted. No Dagster, no Ray import.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepEvent:
    """Base of every event: which unit it is about and when it was emitted."""

    step: str
    partition: str | None
    output_path: str
    at: float = field(default_factory=time.time, kw_only=True)

    @property
    def label(self) -> str:
        """``step`` or ``step[partition]``: how the unit's lines name it."""
        return self.step if self.partition is None else f"{self.step}[{self.partition}]"


@dataclass(frozen=True)
class Started(StepEvent):
    """The unit's function starts (its lease is held). ``where``: the host or Ray node, when known;
    ``fn``: the step function (``module.qualname``); ``attempt``: the id of the attempt (its staging
    folder), which the console's ``running`` line names."""

    where: str | None = None
    fn: str | None = None
    attempt: str | None = None


@dataclass(frozen=True)
class Progress(StepEvent):
    """A progress line of a running unit (training step, lm-eval row, a printed line).

    ``metrics`` holds the numbers the line carries (``train/loss``, ``throughput/tokens_per_second``,
    ``throughput/mfu``, ``step``...) so a front end can plot them without parsing ``message``;
    ``stream`` is ``progress`` for :func:`report_progress` lines, ``stdout`` / ``stderr`` for the
    step's own output.
    """

    message: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    stream: str = "progress"


@dataclass(frozen=True)
class Done(StepEvent):
    """The unit ended well: ``action`` is ``ran``, ``cached`` or ``waited`` (another runner computed
    it); ``seconds`` is the function's own duration (0 for cached)."""

    action: str
    seconds: float = 0.0
    metadata: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed(StepEvent):
    """The unit failed: its function raised, its lease was lost, or it could not start (FAILED
    before, an input missing, its lease unwritable, the run stopped). ``cause`` is the error's last
    line, ``error`` its full text; ``seconds`` counts from when the scheduler started the unit."""

    seconds: float
    cause: str
    error: str = ""


@dataclass(frozen=True)
class NotRun(StepEvent):
    """The unit was not run: ``cause`` names why (its failed input, or ``abandoned``: the lease of an
    input was lost and another runner owns it)."""

    cause: str
    action: str = "dep_failed"


EventListener = Callable[[StepEvent], None]


def emit(listeners: Iterable[EventListener], event: StepEvent) -> None:
    """Tell every listener about ``event``; one that raises is logged and the others still hear it."""
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - a front end's failure must not fail the step it watches
            logger.exception("event listener %r failed on %s", listener, type(event).__name__)
