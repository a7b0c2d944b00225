"""The one way train and eval steps run a subprocess: it never outlives its runner.

A trainer that survives its runner is a second writer on the checkpoint folder once another runner
takes the step over. So every subprocess started here

* runs in its own session / process group (one ``killpg`` stops it and whatever it started);
* gets ``PR_SET_PDEATHSIG = SIGKILL`` (Linux): the kernel kills it when the runner dies, even by
  ``kill -9`` -- there is no parent left to clean up;
* is killed (its whole group) when the step's lease is lost (:mod:`marin_assets.execution.fence`),
  when it runs past its timeout, when it makes no progress (its log does not grow) for
  ``stall_timeout_s``, and when the waiting step is cancelled (after ``term_grace_s`` of SIGTERM,
  for a subprocess that saves its state on SIGTERM, as the trainer does).

Left outside: grandchildren that a subprocess starts in another session of their own are not in
its process group, and the parent-death signal reaches only the direct child.

Progress: while the subprocess runs, a thread follows its log and reports each progress line --
a Levanter metric record (step, train loss, tokens/s, eval losses) or an lm-eval result row -- as
a short line through :func:`marin_resources.progress.report_progress`, for the step that started
the subprocess: when the step runs on Ray, into the Ray task's log and through the driver's relay
(public Ray API) to the driver; in the driver, to the ``marin.progress`` logger (the command line's
run log) and to every registered listener (the Dagster bridge writes them to the run's logs). The
log file itself stays complete.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from marin_assets.execution.fence import on_lease_lost
from marin_assets.training.training_log import JSON_LOGGER_MARK
from marin_resources.progress import current_step, report_progress

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
try:  # resolved in the parent: the child between fork and exec must not load libraries
    _prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no parent-death signal, the process group remains
    _prctl = None


def _die_with(parent_pid: int):
    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the runner died before prctl took effect
            os._exit(137)

    return preexec


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (no-op when it is gone)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# Metrics shown in a progress line, in this order (Levanter's json_logger names); eval/* follow.
# ``throughput/mfu`` is Levanter's model-FLOPs utilisation in percent (absent where Levanter does
# not know the device's peak FLOPs, e.g. on CPU); ``throughput/duration`` the step's seconds.
_PROGRESS_METRICS = (
    ("train/loss", "loss"),
    ("throughput/tokens_per_second", "tokens/s"),
    ("throughput/mfu", "MFU %"),
    ("throughput/duration", "step s"),
)
_MAX_EVAL_METRICS = 6
POLL_S = 0.5


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value)


def _flat(metrics: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _metric_record(line: str) -> dict | None:
    """The Levanter json_logger ``log`` record of one log line (with a step), or None."""
    if JSON_LOGGER_MARK not in line or "{" not in line:
        return None
    try:
        record = json.loads(line[line.find("{") :])
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or record.get("event") != "log" or record.get("step") is None:
        return None
    return record


def progress_metrics(line: str) -> dict[str, float]:
    """The numbers of a Levanter metric record (``step``, ``train/loss``, ``throughput/mfu`` ...),
    flat and finite; ``{}`` for any other line. They travel with the progress line so that front
    ends plot them without parsing text."""
    record = _metric_record(line)
    if record is None:
        return {}
    out: dict[str, float] = {"step": float(record["step"])}
    for key, value in _flat(record.get("metrics") or {}).items():
        if (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value == value
            and abs(value) != float("inf")
        ):
            out[key] = float(value)
    return out


def progress_of(line: str) -> str | None:
    """The progress line of one log line, or None: a Levanter metric record becomes
    ``step N: loss …, tokens/s …, eval/loss …``; an lm-eval result row (``|task|…|value|…|``) is
    kept as it is; anything else (warnings, progress bars, summaries) is not progress."""
    stripped = line.strip()
    if JSON_LOGGER_MARK in line and "{" in line:
        record = _metric_record(line)
        if record is None:
            return None
        flat = _flat(record.get("metrics") or {})
        parts = [f"{label} {_number(flat[key])}" for key, label in _PROGRESS_METRICS if key in flat]
        evals = [f"{key} {_number(value)}" for key, value in flat.items() if key.startswith("eval/")]
        parts += evals[:_MAX_EVAL_METRICS]
        return f"step {record['step']}: {', '.join(parts)}" if parts else None
    if stripped.startswith("|") and stripped.endswith("|") and any(c.isdigit() for c in stripped):
        cells = [c.strip() for c in stripped.strip("|").split("|")]
        if cells and not set(cells[0]) <= set("-: "):  # not the table's rule line
            return " | ".join(c for c in cells if c)
    return None


class NoProgressError(TimeoutError):
    """A subprocess wrote nothing to its log for longer than its progress timeout (it was killed)."""


class _ProgressFollower(threading.Thread):
    """Follows a log from ``offset`` and reports its progress lines until stopped (then drains);
    ``last_activity`` is when the log last grew (monotonic seconds), ``last_progress`` its last
    progress line."""

    def __init__(self, log_path: str, offset: int, label: str, step: str | None) -> None:
        super().__init__(name=f"marin-progress-{label}", daemon=True)
        self.log_path, self.offset, self.label, self.step = log_path, offset, label, step
        self.stopped = threading.Event()
        self.last_activity = time.monotonic()
        self.last_progress: str | None = None

    def run(self) -> None:
        try:
            self._follow()
        except OSError as exc:  # the log went away (a discarded staging folder): the step goes on
            logger.warning("stopped following %s for progress lines: %s", self.log_path, exc)

    def _follow(self) -> None:
        pending = ""
        with open(self.log_path, encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            while True:
                chunk = handle.read()
                if chunk:
                    self.last_activity = time.monotonic()
                    lines = (pending + chunk).split("\n")
                    pending = lines.pop()
                    for line in lines:
                        progress = progress_of(line)
                        if progress is not None:
                            self.last_progress = progress
                            report_progress(f"{self.label}: {progress}", step=self.step, metrics=progress_metrics(line))
                elif self.stopped.is_set():
                    return
                else:
                    self.stopped.wait(POLL_S)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


def start(cmd: Sequence[str], log_path: str, env: Mapping[str, str], label: str | None = None) -> subprocess.Popen:
    """Start ``cmd`` with stdout and stderr appended to ``log_path``; it dies with this process and
    with the running step's lease; its progress lines are reported under ``label`` (default: the
    log's file name). Pair with :func:`wait` (or :func:`finish`)."""
    offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
            preexec_fn=_die_with(os.getpid()),  # noqa: PLW1509 - only prctl/getppid run in the child
        )

    def on_lost() -> None:
        logger.error("lease lost: killing %s (pid %d) and its process group", cmd[:3], proc.pid)
        kill_group(proc)

    proc.unregister_fence = on_lease_lost(on_lost)  # type: ignore[attr-defined]
    # The step this thread runs: the follower thread reports for it (threads are not tagged themselves).
    follower = _ProgressFollower(log_path, offset, label or os.path.basename(log_path), current_step())
    follower.start()
    proc.progress_follower = follower  # type: ignore[attr-defined]
    return proc


def finish(proc: subprocess.Popen) -> None:
    """After ``proc`` ended (or was killed): stop watching the lease, report its last progress lines."""
    getattr(proc, "unregister_fence", lambda: None)()
    follower = getattr(proc, "progress_follower", None)
    if follower is not None:
        follower.stop()


def _stop(proc: subprocess.Popen, term_grace_s: float) -> None:
    """SIGTERM the group and give it ``term_grace_s`` to exit (0: none), then SIGKILL it."""
    if term_grace_s > 0 and proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=term_grace_s)
    kill_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def wait(
    proc: subprocess.Popen,
    timeout_s: float | None,
    stall_timeout_s: float | None = None,
    term_grace_s: float = 0.0,
) -> int:
    """Wait for ``proc``; kill its group when it runs past ``timeout_s`` (``subprocess.TimeoutExpired``),
    when its log has not grown for ``stall_timeout_s`` (:class:`NoProgressError`, one line naming the
    cause), or when the wait is cancelled (any exception here, e.g. a Dagster run terminated: SIGTERM
    first, ``term_grace_s`` to save its state, then SIGKILL)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    follower: _ProgressFollower | None = getattr(proc, "progress_follower", None)
    try:
        while True:
            try:
                return proc.wait(timeout=POLL_S * 2)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if deadline is not None and now > deadline:
                kill_group(proc)
                raise subprocess.TimeoutExpired(proc.args, timeout_s or 0.0)
            if stall_timeout_s is not None and follower is not None and now - follower.last_activity > stall_timeout_s:
                kill_group(proc)
                last = f"; last progress: {follower.last_progress!r}" if follower.last_progress else ""
                raise NoProgressError(
                    f"{follower.label}: no progress for {now - follower.last_activity:.0f} s (nothing new in "
                    f"{follower.log_path}; limit {stall_timeout_s:g} s){last}: stopped"
                )
    except BaseException:
        _stop(proc, term_grace_s)
        raise
    finally:
        finish(proc)


def run(cmd: Sequence[str], log_path: str, env: Mapping[str, str], timeout_s: float | None) -> str:
    """Run ``cmd`` to completion (see :func:`start`); return its log, raise RuntimeError when it fails."""
    proc = start(cmd, log_path, env)
    rc = wait(proc, timeout_s)
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    if rc != 0:
        raise RuntimeError(f"{' '.join(list(cmd)[:4])} exited with {rc}; log {log_path}:\n{text[-4000:]}")
    return text
