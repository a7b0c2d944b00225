"""Progress and output lines of a running step, from wherever it runs to the run that launched it.

A training or evaluation step reports short progress lines (``step 20: loss 5.8, tokens/s 7012``,
an lm-eval result row), with the numbers they carry, through :func:`report_progress`; the step's
printed output is captured line by line (:func:`capturing_output`). Both go to the step's
*reporter*: a callable ``reporter(line, metrics, stream)`` that the engine installs around the
step function (:func:`reporting_to`) and that turns each line into one event of the engine's
stream (``marin_assets.execution.events.Progress``). Nothing is registered globally: a line
reported outside a step (no reporter) goes to the ``marin.progress`` logger only.

From a **Ray worker** (the step runs as a Ray task, on this machine or another node, directly
connected or through Ray Client) the task's reporter is a :class:`_TaskForwarder`: it sends the lines
to a small Ray actor owned by the driver (:class:`ProgressRelay`, public Ray API: actor calls), and a
driver thread hands each line to the reporter that launch subscribed (:meth:`ProgressRelay.subscribe`).
Nothing here reads a Ray private module or a driver's stdout: the lines arrive whether or not Ray
forwards the worker's output to the driver (``log_to_driver``, off by default: see
``marin_resources.ray_connect``) -- which is how a step's output reaches the run once, not once per
Ray node on the machine.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO, cast

logger = logging.getLogger(__name__)

PROGRESS_LOGGER = "marin.progress"
# Printed before each progress line in a Ray task's own log (the dashboard's task log, the node's
# worker-*.out): only for people reading that log; nothing parses it.
PROGRESS_MARK = "[marin progress]"

# reporter(line, metrics, stream): stream is "progress", "stdout" or "stderr".
Reporter = Callable[[str, Mapping[str, float], str], None]

# The reporter of the calling thread (a step running in this process), and the process-wide one
# inside a Ray task (a Ray worker runs one task at a time; the step's own threads report for it too).
_THREAD = threading.local()
_PROCESS: list[Reporter] = []


def current_reporter() -> Reporter | None:
    """The reporter lines of the calling thread go to (:func:`reporting_to`), if any. A thread a
    step starts (a subprocess's log follower) takes it along and passes it to :func:`report_progress`."""
    return getattr(_THREAD, "reporter", None) or (_PROCESS[-1] if _PROCESS else None)


def report_progress(
    line: str,
    metrics: Mapping[str, float] | None = None,
    stream: str = "progress",
    to: Reporter | None = None,
) -> None:
    """Report one progress line of the running step (``to`` default: :func:`current_reporter`),
    with the numbers it carries (``metrics``: ``step``, ``train/loss``, ``throughput/mfu`` ...).

    Inside a Ray task the line is also printed into the task's own log. A reporter that fails is
    logged once and the step goes on: progress never fails a step.
    """
    reporter = to or current_reporter()
    if reporter is None:
        logging.getLogger(PROGRESS_LOGGER).info(line)
        return
    if isinstance(reporter, _TaskForwarder):
        _original_stdout().write(f"{PROGRESS_MARK} {line}\n")
    _deliver(reporter, line, dict(metrics or {}), stream)


_FAILED_REPORTERS: set[int] = set()  # ids of reporters whose failure was said already


def _deliver(reporter: Reporter, line: str, metrics: Mapping[str, float], stream: str) -> None:
    try:
        reporter(line, metrics, stream)
    except Exception as exc:  # noqa: BLE001 - a listener's failure never fails the step; said once
        if id(reporter) not in _FAILED_REPORTERS:
            _FAILED_REPORTERS.add(id(reporter))
            logger.warning("a progress reporter failed (%s: %s); the step goes on", type(exc).__name__, exc)


@contextlib.contextmanager
def reporting_to(reporter: Reporter, whole_process: bool = False) -> Iterator[None]:
    """Lines reported by the calling thread while the block runs go to ``reporter``; with
    ``whole_process`` (inside a Ray task) lines of every thread of the process do."""
    previous = getattr(_THREAD, "reporter", None)
    _THREAD.reporter = reporter
    if whole_process:
        _PROCESS.append(reporter)
    try:
        yield
    finally:
        if whole_process:
            _PROCESS.remove(reporter)
        _THREAD.reporter = previous


# ------------------------------------------------------------------ printed output
class _StepOutput:
    """``sys.stdout`` / ``sys.stderr`` while steps run: everything is written to the stream it
    replaced (so the process's captured output holds each line once), and each complete line a
    step prints is also given to that step's reporter (``stream``: ``stdout`` / ``stderr``). Any
    other attribute is the replaced stream's (``encoding``, ``fileno``, ``isatty`` ...)."""

    def __init__(self, underlying: TextIO, stream: str) -> None:
        self.underlying = underlying
        self.stream = stream
        self._pending = threading.local()

    def write(self, text: str) -> int:
        written = self.underlying.write(text)
        reporter = current_reporter()
        if reporter is not None and text:
            pending = getattr(self._pending, "text", "") + text
            *lines, rest = pending.split("\n")
            self._pending.text = rest
            for line in lines:
                if line.strip():
                    _deliver(reporter, line, {}, self.stream)
        return written if isinstance(written, int) else len(text)

    def flush(self) -> None:
        self.underlying.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.underlying, name)


_CAPTURE_LOCK = threading.Lock()
_CAPTURES = [0]


def _original_stdout() -> TextIO:
    out = sys.stdout
    return out.underlying if isinstance(out, _StepOutput) else out


@contextlib.contextmanager
def capturing_output() -> Iterator[None]:
    """While the block runs, lines printed by a thread with a reporter reach it (see
    :class:`_StepOutput`); nested and concurrent blocks share one capture, removed by the last."""
    with _CAPTURE_LOCK:
        if _CAPTURES[0] == 0 and not isinstance(sys.stdout, _StepOutput):
            sys.stdout = cast(TextIO, _StepOutput(sys.stdout, "stdout"))
            sys.stderr = cast(TextIO, _StepOutput(sys.stderr, "stderr"))
        _CAPTURES[0] += 1
    try:
        yield
    finally:
        with _CAPTURE_LOCK:
            _CAPTURES[0] -= 1
            if _CAPTURES[0] == 0:
                # Put back only what we installed (someone may have replaced it meanwhile).
                if isinstance(sys.stdout, _StepOutput):
                    sys.stdout.flush()
                    sys.stdout = sys.stdout.underlying
                if isinstance(sys.stderr, _StepOutput):
                    sys.stderr.flush()
                    sys.stderr = sys.stderr.underlying


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
        """Holds the lines of a driver's Ray tasks until the driver takes them."""

        def __init__(self) -> None:
            self.items: list[tuple[int, str, dict[str, float], str]] = []
            self.arrived = asyncio.Event()

        async def put(self, items: list[tuple[int, str, dict[str, float], str]]) -> None:
            self.items.extend(items)
            self.arrived.set()

        async def take(self, wait_s: float) -> list[tuple[int, str, dict[str, float], str]]:
            if not self.items:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.arrived.wait(), wait_s)
            items, self.items = self.items, []
            self.arrived.clear()
            return items

    _MAILBOX_CLASS.append(ProgressMailbox)
    return ProgressMailbox


class _TaskForwarder:
    """A Ray task's reporter: sends its lines to the driver's mailbox, tagged with the launch's
    subscription. Progress lines are sent at once; output lines in batches (at most
    ``BATCH_S`` old, and all of them by :meth:`flush` when the task ends). Each send is waited for
    (an async actor keeps one caller's calls in order only so). Picklable: it travels inside the
    task's function. After a failure (the driver went away) it stops sending: the lines stay in the
    task's log."""

    SEND_TIMEOUT_S = 10.0
    BATCH_S = 0.5
    BATCH_LINES = 200

    def __init__(self, mailbox: Any, subscription: int) -> None:
        self.mailbox = mailbox
        self.subscription = subscription
        self._reset()

    def _reset(self) -> None:
        self.broken = False
        self.batch: list[tuple[int, str, dict[str, float], str]] = []
        self.sent_at = time.monotonic()
        self.lock = threading.Lock()

    def __call__(self, line: str, metrics: Mapping[str, float], stream: str) -> None:
        with self.lock:
            if self.broken:
                return
            self.batch.append((self.subscription, line, dict(metrics), stream))
            due = stream == "progress" or len(self.batch) >= self.BATCH_LINES
            if due or time.monotonic() - self.sent_at >= self.BATCH_S:
                self._send()

    def flush(self) -> None:
        with self.lock:
            if not self.broken and self.batch:
                self._send()

    def _send(self) -> None:
        import ray

        batch, self.batch = self.batch, []
        self.sent_at = time.monotonic()
        try:
            ray.get(self.mailbox.put.remote(batch), timeout=self.SEND_TIMEOUT_S)
        except Exception:
            self.broken = True
            raise

    def __getstate__(self) -> dict[str, Any]:
        return {"mailbox": self.mailbox, "subscription": self.subscription}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.mailbox = state["mailbox"]
        self.subscription = state["subscription"]
        self._reset()


class ProgressRelay:
    """The driver's end of the Ray transport: one mailbox actor per driver connection, and a thread
    that takes the lines out and hands each to the reporter its launch subscribed."""

    ANSWER_TIMEOUT_S = 30.0

    def __init__(self) -> None:
        self.connection = _connection_id()
        self.mailbox = _mailbox_class().remote()
        self._lock = threading.Lock()
        self._reporters: dict[int, Reporter] = {}
        self._ids = itertools.count(1)
        self._stopped = threading.Event()
        self._failed = False
        self._thread = threading.Thread(target=self._follow, name="marin-progress-relay", daemon=True)
        self._thread.start()

    def subscribe(self, reporter: Reporter) -> _TaskForwarder:
        """A forwarder for one Ray task: the lines it sends are handed to ``reporter`` here."""
        subscription = next(self._ids)
        self._reporters[subscription] = reporter
        return _TaskForwarder(self.mailbox, subscription)

    def unsubscribe(self, forwarder: _TaskForwarder) -> None:
        """Deliver what the mailbox holds now (the task ended: its lines come first), then forget it."""
        self.drain()
        self._reporters.pop(forwarder.subscription, None)

    def _take(self, wait_s: float) -> None:
        """Take what the mailbox holds (waiting up to ``wait_s`` for a line) and deliver it here.

        The answer is awaited as a Python future (``ObjectRef.future()``), never with ``ray.get``:
        a thread blocked inside Ray while the driver disconnects (``ray.shutdown``, interpreter exit)
        can crash the process; a Python future simply never completes.
        """
        with self._lock:  # one taker at a time, and lines delivered in the order they were sent
            answer = self.mailbox.take.remote(wait_s).future()
            for subscription, line, metrics, stream in answer.result(timeout=wait_s + self.ANSWER_TIMEOUT_S):
                reporter = self._reporters.get(subscription)
                if reporter is None:  # its launch already ended (a line sent after the task returned)
                    logging.getLogger(PROGRESS_LOGGER).info(line)
                else:
                    _deliver(reporter, line, metrics, stream)

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
                        "progress relay stopped (%s: %s): later lines of Ray tasks stay in their task logs",
                        type(exc).__name__,
                        exc,
                    )
                return

    def drain(self) -> None:
        """Deliver what the mailbox holds now."""
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
        relay = ProgressRelay()
        if not _RELAY_EXIT_HOOK:
            import atexit

            # Registered after ray.init's own exit hook, so it runs first: the thread is out of its
            # Ray call before Ray shuts down.
            atexit.register(stop_relays)
            _RELAY_EXIT_HOOK.append(True)
        _RELAY.append(relay)
        return relay


def run_reporting(fn: Callable[[Any], Any], forwarder: _TaskForwarder) -> Callable[[Any], Any]:
    """``fn`` wrapped for a Ray task: its progress lines and printed output go to ``forwarder``
    (all of them before the task returns). The output is still written to the task's own log."""

    def call(config: Any) -> Any:
        with reporting_to(forwarder, whole_process=True), capturing_output():
            try:
                return fn(config)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    stream.flush()
                try:
                    forwarder.flush()
                except Exception as exc:  # noqa: BLE001 - the driver went away: lines stay in the task log
                    logger.warning("could not send the last lines to the driver (%s: %s)", type(exc).__name__, exc)

    call.__name__ = getattr(fn, "__name__", "step")
    return call
