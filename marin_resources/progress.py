"""Progress lines of running steps: one public channel from wherever a step runs to whoever listens.

A training or evaluation step reports short progress lines (``step 20: loss 5.8, tokens/s 7012``,
an lm-eval result row) with :func:`report_progress`. Where they go:

* **Sinks** -- callables registered with :func:`progress_sink` in the process that runs the steps
  (the driver: ``executor_main``, a Dagster run's step process). The Dagster bridge subscribes one
  for the duration of a step op and writes each line to the run's log; this module knows nothing of
  Dagster (like :mod:`marin_assets.execution.observers`).
* The ``marin.progress`` logger of the driver, always (the command line's run log file).
* From a **Ray worker** (the step runs as a Ray task, on this machine or on another node, directly
  connected or through Ray Client): the launcher (:mod:`marin_assets.execution.ray_launch`) hands the
  task a :class:`ProgressRelay` -- a small Ray actor owned by the driver -- and the task's lines are
  sent to it through public Ray API (actor method calls). A driver thread takes them out and reports
  them in the driver as above. The line is also printed into the task's own log.

Nothing here reads a Ray private module or a driver's stdout: the lines arrive whether or not the
worker's output is forwarded to the driver (``log_to_driver``).

Each line carries the step it belongs to (``ProgressEvent.step``), set by the launcher around the
step function (:func:`reporting_for`), so a listener that runs several steps at once can tell
them apart; :func:`last_progress` keeps each step's last line for its metadata.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

PROGRESS_LOGGER = "marin.progress"
# Printed before each progress line in a Ray task's own log (the dashboard's task log, the node's
# worker-*.out): only for people reading that log; nothing parses it.
PROGRESS_MARK = "[marin progress]"


@dataclass(frozen=True)
class ProgressEvent:
    """One progress line of a step (``step``: the step's name, None when unknown); ``metrics``: the
    numbers the line shows (e.g. ``throughput/mfu``), for front ends that plot them."""

    step: str | None
    line: str
    metrics: Mapping[str, float] = field(default_factory=dict)


ProgressSink = Callable[[ProgressEvent], None]

_LOCK = threading.Lock()
_SINKS: dict[int, ProgressSink] = {}
_NEXT_ID = [0]
# Where a line reported in this process goes instead of the local sinks (inside a Ray task: the
# driver's relay), and which step it belongs to. Process-wide, not per thread: a Ray worker runs one
# task at a time, and the step's own threads (a subprocess's log follower) report for it too.
_FORWARD: list[Callable[[ProgressEvent], None]] = []
_CURRENT_STEP: list[str | None] = [None]
_THREAD_STEP = threading.local()


def _sink_failed(sink: ProgressSink, exc: Exception) -> None:
    # A listener's failure (a closed Dagster log, a dead relay) must never fail the step: say it once
    # per sink and go on; the line still reached the logger and the other sinks.
    if not getattr(sink, "_marin_failed_once", False):
        with contextlib.suppress(AttributeError, TypeError):
            sink._marin_failed_once = True  # type: ignore[attr-defined]
        logger.warning(
            "a progress listener failed (%s: %s); later lines still reach the others", type(exc).__name__, exc
        )


def dispatch(event: ProgressEvent) -> None:
    """Deliver ``event`` in this process: the ``marin.progress`` logger and every registered sink."""
    logging.getLogger(PROGRESS_LOGGER).info(event.line)
    _remember(event)
    with _LOCK:
        sinks = list(_SINKS.values())
    for sink in sinks:
        try:
            sink(event)
        except Exception as exc:  # noqa: BLE001 - see _sink_failed: progress never fails a step
            _sink_failed(sink, exc)


def current_step() -> str | None:
    """The step the calling thread reports for (:func:`reporting_for`), if any."""
    return getattr(_THREAD_STEP, "name", None) or _CURRENT_STEP[0]


def report_progress(line: str, step: str | None = None, metrics: Mapping[str, float] | None = None) -> None:
    """Report one progress line of the running step (``step`` default: :func:`current_step`).

    Inside a Ray task launched with a relay: printed into the task's log and sent to the driver.
    Elsewhere: delivered here (:func:`dispatch`) -- never printed, so a command line's console keeps
    one line per unit.
    """
    event = ProgressEvent(step if step is not None else current_step(), line, dict(metrics or {}))
    forward = _FORWARD[-1] if _FORWARD else None
    if forward is None:
        dispatch(event)
        return
    print(f"{PROGRESS_MARK} {line}", flush=True)
    try:
        forward(event)
    except Exception as exc:  # noqa: BLE001 - progress never fails a step; the line is in the task log
        _sink_failed(forward, exc)


@contextlib.contextmanager
def progress_sink(sink: ProgressSink) -> Iterator[None]:
    """While the block runs, ``sink`` receives every progress line delivered in this process."""
    with _LOCK:
        _NEXT_ID[0] += 1
        key = _NEXT_ID[0]
        _SINKS[key] = sink
    try:
        yield
    finally:
        with _LOCK:
            _SINKS.pop(key, None)


@contextlib.contextmanager
def reporting_for(step: str | None, forward: Callable[[ProgressEvent], None] | None = None) -> Iterator[None]:
    """Lines reported by the calling thread while the block runs belong to ``step``.

    With ``forward`` (inside a Ray task: the driver's relay), every line reported in this process
    goes there instead of to this process's sinks, and belongs to ``step`` whichever thread reports
    it (a Ray worker runs one task at a time; the step's own threads report for it too). Without it
    (the driver, where several steps run at once in threads), only the calling thread is tagged:
    threads a step starts pass the step on themselves (``subprocess_runner`` does).
    """
    previous_thread = getattr(_THREAD_STEP, "name", None)
    previous_process = _CURRENT_STEP[0]
    _THREAD_STEP.name = step
    if forward is not None:
        _CURRENT_STEP[0] = step
        _FORWARD.append(forward)
    try:
        yield
    finally:
        if forward is not None:
            _FORWARD.remove(forward)
            _CURRENT_STEP[0] = previous_process
        _THREAD_STEP.name = previous_thread


# ------------------------------------------------------------------ each step's last line
_LAST: dict[str, tuple[str, int]] = {}


def _remember(event: ProgressEvent) -> None:
    if event.step is None:
        return
    with _LOCK:
        _, count = _LAST.get(event.step, ("", 0))
        _LAST[event.step] = (event.line, count + 1)


def last_progress(step: str, forget: bool = True) -> tuple[str, int] | None:
    """``(last line, number of lines)`` delivered in this process for ``step`` (None: none); ``forget``
    drops the record (the launcher reads it once, when the step ends)."""
    with _LOCK:
        return _LAST.pop(step, None) if forget else _LAST.get(step)


# ------------------------------------------------------------------ Ray transport
_MAILBOX_CLASS: list[Any] = []


def _mailbox_class() -> Any:
    """The relay's actor class (defined on first use: importing this module never imports Ray)."""
    if _MAILBOX_CLASS:
        return _MAILBOX_CLASS[0]
    import asyncio

    import ray

    @ray.remote(num_cpus=0, max_restarts=0)
    class ProgressMailbox:
        """Holds the progress lines of a driver's Ray tasks until the driver takes them."""

        def __init__(self) -> None:
            self.items: list[tuple[str | None, str]] = []
            self.arrived = asyncio.Event()

        async def put(self, step: str | None, line: str) -> None:
            self.items.append((step, line))
            self.arrived.set()

        async def take(self, wait_s: float) -> list[tuple[str | None, str]]:
            if not self.items:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.arrived.wait(), wait_s)
            items, self.items = self.items, []
            self.arrived.clear()
            return items

    _MAILBOX_CLASS.append(ProgressMailbox)
    return ProgressMailbox


class _TaskForwarder:
    """What a Ray task calls for each line: an actor call to the driver's mailbox, waited for (an
    async actor does not keep one caller's calls in order unless each is done before the next).
    Picklable: it travels inside the task's function. After a failure (the driver went away) it
    stops sending: the lines stay in the task's log."""

    SEND_TIMEOUT_S = 10.0

    def __init__(self, mailbox: Any) -> None:
        self.mailbox = mailbox
        self.broken = False

    def __call__(self, event: ProgressEvent) -> None:
        if self.broken:
            return
        import ray

        try:
            ray.get(self.mailbox.put.remote(event.step, event.line), timeout=self.SEND_TIMEOUT_S)
        except Exception:
            self.broken = True
            raise

    def __getstate__(self) -> dict[str, Any]:
        return {"mailbox": self.mailbox}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.mailbox = state["mailbox"]
        self.broken = False


class ProgressRelay:
    """The driver's end of the Ray transport: one mailbox actor per driver connection, and a thread
    that takes the lines out and delivers them here (:func:`dispatch`)."""

    ANSWER_TIMEOUT_S = 30.0

    def __init__(self) -> None:

        self.connection = _connection_id()
        self.mailbox = _mailbox_class().remote()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._failed = False
        self._thread = threading.Thread(target=self._follow, name="marin-progress-relay", daemon=True)
        self._thread.start()

    def forwarder(self) -> _TaskForwarder:
        """What a Ray task of this driver reports through (see :func:`run_reporting`)."""
        return _TaskForwarder(self.mailbox)

    def _take(self, wait_s: float) -> None:
        """Take what the mailbox holds (waiting up to ``wait_s`` for a line) and deliver it here.

        The answer is awaited as a Python future (``ObjectRef.future()``), never with ``ray.get``:
        a thread blocked inside Ray while the driver disconnects (``ray.shutdown``, interpreter exit)
        can crash the process; a Python future simply never completes.
        """
        with self._lock:  # one taker at a time, and lines delivered in the order they were sent
            answer = self.mailbox.take.remote(wait_s).future()
            for step, line in answer.result(timeout=wait_s + self.ANSWER_TIMEOUT_S):
                dispatch(ProgressEvent(step, line))

    def _follow(self) -> None:
        import ray

        while not self._stopped.is_set():
            if self.connection != _connection_id():
                # The driver reconnected (maybe to another cluster): this relay's actor is gone.
                self._failed = True
                return
            try:
                self._take(1.0)
            except concurrent.futures.TimeoutError:
                continue  # a slow answer (a loaded machine): ask again
            except Exception as exc:  # noqa: BLE001 - the relay is gone; said below, thread ends
                self._failed = True
                if self._stopped.is_set() or not ray.is_initialized():
                    logger.debug("progress relay ended with the Ray connection (%s)", type(exc).__name__)
                else:
                    logger.warning(
                        "progress relay stopped (%s: %s): later progress lines of Ray tasks stay in their task logs",
                        type(exc).__name__,
                        exc,
                    )
                return

    def drain(self) -> None:
        """Deliver what the mailbox holds now (called when a task ended, so its lines come first)."""
        if self._failed:
            return
        try:
            self._take(0.0)
        except Exception as exc:  # noqa: BLE001 - same as _follow: the lines stay in the task log
            logger.warning("could not take progress lines from the relay (%s: %s)", type(exc).__name__, exc)

    def alive(self) -> bool:
        return not self._failed and self._thread.is_alive()

    def stop(self, wait_s: float = 0.0) -> None:
        """Stop taking lines; with ``wait_s``, wait that long for the thread to leave its Ray call."""
        self._stopped.set()
        if wait_s:
            self._thread.join(timeout=wait_s)


def _connection_id() -> tuple[str, str] | None:
    """Which connection this driver has now (Ray numbers jobs from 01000000 on every cluster, so the
    job id alone does not tell two clusters apart); None when disconnected."""
    import ray

    if not ray.is_initialized():
        return None
    context = ray.get_runtime_context()
    return (str(getattr(context, "gcs_address", "")), context.get_job_id())


_RELAY: list[ProgressRelay] = []
_RELAY_LOCK = threading.Lock()
_RELAY_EXIT_HOOK: list[bool] = []


def stop_relays() -> None:
    """Stop the relay threads (waiting for each to leave its Ray call): before ``ray.shutdown``."""
    for relay in list(_RELAY):
        relay.stop(wait_s=3.0)


def driver_relay() -> ProgressRelay:
    """This driver's relay (started on first use; again after the connection changed)."""

    with _RELAY_LOCK:
        if _RELAY and _RELAY[0].alive() and _RELAY[0].connection == _connection_id():
            return _RELAY[0]
        if _RELAY:
            _RELAY.pop().stop()
        started = time.monotonic()
        relay = ProgressRelay()
        if not _RELAY_EXIT_HOOK:
            import atexit

            # Registered after ray.init's own exit hook, so it runs first: the thread is out of its
            # Ray call before Ray shuts down.
            atexit.register(stop_relays)
            _RELAY_EXIT_HOOK.append(True)
        _RELAY.append(relay)
        logger.debug("progress relay started in %.1fs", time.monotonic() - started)
        return relay


def run_reporting(fn: Callable[[Any], Any], step: str | None, forwarder: _TaskForwarder) -> Callable[[Any], Any]:
    """``fn`` wrapped for a Ray task: its progress lines belong to ``step`` and go to ``forwarder``
    (each one delivered before the next is sent, so all of them before the task returns)."""

    def call(config: Any) -> Any:
        with reporting_for(step, forwarder):
            return fn(config)

    call.__name__ = getattr(fn, "__name__", "step")
    return call
