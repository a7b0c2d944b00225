"""A Levanter run's log and what is read back from it: json_logger metric records, step folders,
the loss curve, the step Levanter resumed from.

The log lives with the attempt (:class:`AttemptLog`): in the step's output folder -- the attempt's
staging folder while it runs -- so a takeover that copies the attempt copies its log too, and a
resumed run's ``train.log`` and ``metrics.jsonl`` hold the whole history, on any host.

On an object store the log reaches the store only when it is uploaded, so a host frozen or lost
mid-run leaves the lines since its last upload behind -- while its checkpoints, written by Levanter
straight to the store, are copied by the host that takes over. Left alone, the new host would
resume after steps whose metric records exist nowhere (a takeover on gs:// lost steps 1-10). Two
rules keep the history whole: the log is uploaded as soon as a checkpoint completes (Levanter logs
a step's metrics before it checkpoints that step, so the upload covers the checkpoint), and an
attempt that continues a copied log first removes, from its own staging folder, every checkpoint
newer than the last step that log records (:func:`uncovered_checkpoints`) -- it then resumes from
the newest checkpoint its history covers and recomputes (and logs) the few steps after it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from marin_assets.execution.attempt import CHECKPOINT_MARKER, CHECKPOINTS_FOLDER
from marin_assets.execution.storage import atomic_write_bytes, exists, filesystem, is_local, join_path, read_bytes

logger = logging.getLogger(__name__)

LOG_SYNC_S = 10.0  # how often a log on an object store is uploaded while the run goes on
LOG_POLL_S = 1.0  # how often it looks for a newly completed checkpoint (then uploads at once)
START_MARK = "===== marin: train_lm start"
_RESUMED = re.compile(r"Resuming training from step (\d+)")
_LOADED = re.compile(r"Loading checkpoint from \S*/step-(\d+)\b")


class AttemptLog:
    """The log file of a step, kept in its output folder (the attempt's staging folder).

    Local output: the file itself (``<out>/<name>``), appended to across resumes. Object store: a
    file can only be replaced whole, so the step appends to a local mirror in a fresh temporary
    folder -- seeded with the attempt's log when there is one (a resumed or taken-over attempt
    copied it) -- which is uploaded to ``<out>/<name>`` every ``sync_s`` seconds, within
    ``poll_s`` of a checkpoint completing under ``<out>/checkpoints``, on :meth:`sync` and when the
    block ends. A host lost mid-run loses at most the lines since its last upload; the host that
    takes over continues the log it finds, after dropping the copied checkpoints that log does not
    cover (see the module docstring), so the history it publishes has every step.
    """

    def __init__(
        self, out: str, name: str = "train.log", sync_s: float = LOG_SYNC_S, poll_s: float = LOG_POLL_S
    ) -> None:
        self.remote = join_path(out, name)
        # The run's checkpoints, beside the run's log (host 0's: another host's log folder,
        # hosts/<i>/, has none, so only host 0 drops uncovered checkpoints -- before its trainer
        # starts, so before the slice's jax.distributed barrier that every host's resume waits on).
        self.checkpoints = join_path(out, CHECKPOINTS_FOLDER)
        self.sync_s = sync_s
        self.poll_s = min(poll_s, sync_s)
        self._local_dir = None if is_local(out) else tempfile.mkdtemp(prefix="marin-attempt-log-")
        self.path = filesystem(self.remote)[1] if self._local_dir is None else os.path.join(self._local_dir, name)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._synced_size = -1
        self._sync_lock = threading.Lock()
        self._covered: set[int] = set()  # complete checkpoints whose step an upload of the log covers

    def __enter__(self) -> AttemptLog:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        if self._local_dir is not None:
            earlier = read_bytes(self.remote)  # the attempt's log so far (copied at a takeover)
            with open(self.path, "wb") as handle:
                handle.write(earlier or b"")
            self._synced_size = len(earlier or b"")
            self._drop_uncovered_checkpoints((earlier or b"").decode("utf-8", errors="replace"))
            self._covered = self._complete_checkpoints()
            self._thread = threading.Thread(target=self._sync_loop, name=f"log-sync:{self.remote}", daemon=True)
            self._thread.start()
        return self

    def _complete_checkpoints(self, known: set[int] | None = None) -> set[int]:
        """Steps of the checkpoints under ``<out>/checkpoints`` that have their completion marker (one
        listing, plus one look for the marker of each checkpoint not ``known`` complete already)."""
        known = known or set()
        return {
            step
            for step, path in list_step_dirs(self.checkpoints)
            if step in known or exists(join_path(path, CHECKPOINT_MARKER))
        }

    def _drop_uncovered_checkpoints(self, log_text: str) -> None:
        complete = self._complete_checkpoints()
        for step in uncovered_checkpoints(log_text, complete):
            logger.warning(
                "%s: checkpoint step-%d is newer than the last step its copied log records (its writer "
                "stopped before uploading those lines); resuming from an earlier checkpoint so the "
                "history stays whole",
                self.checkpoints,
                step,
            )
            fs, path = filesystem(join_path(self.checkpoints, f"step-{step}"))
            fs.rm(path, recursive=True)

    def _sync_loop(self) -> None:
        last = 0.0
        while not self._stop.wait(self.poll_s):
            try:
                if os.path.getsize(self.path) == self._synced_size:
                    continue
                now = time.monotonic()
                complete = self._complete_checkpoints(self._covered)
                if now - last >= self.sync_s or complete - self._covered:
                    # Read after the checkpoint's marker was seen: the upload covers that step.
                    self.sync()
                    self._covered |= complete
                    last = now
            except Exception as exc:  # noqa: BLE001 - the next sync retries; the final one raises
                logger.warning("could not upload %s (retried in %.0fs): %s", self.remote, self.poll_s, exc)

    def sync(self) -> None:
        """Upload the local mirror when it grew (a no-op for a local output)."""
        if self._local_dir is None:
            return
        with self._sync_lock:
            size = os.path.getsize(self.path)
            if size == self._synced_size:
                return
            with open(self.path, "rb") as handle:
                data = handle.read()
            atomic_write_bytes(self.remote, data)
            self._synced_size = len(data)

    def text(self) -> str:
        """The whole log so far."""
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.sync()  # a failed run's log is uploaded too: the next attempt continues it
        except Exception as sync_error:
            if exc is None:
                raise
            # The run's own error is the one to report; this upload failing is secondary.
            logger.warning("could not upload %s after the run failed: %s", self.remote, sync_error)
        finally:
            if self._local_dir is not None:
                shutil.rmtree(self._local_dir, ignore_errors=True)


def resumed_from_step(log_text: str) -> int:
    """The checkpoint step Levanter resumed from in the last run of ``log_text`` (0: a fresh start).

    Read from Levanter's own lines after the last :data:`START_MARK`: a resume is announced by
    ``Resuming training from step S``; the checkpoint it loaded by ``Loading checkpoint from
    .../step-N`` -- N is returned, the folder Levanter actually read, not whatever folders exist
    (an unfinished one is skipped by Levanter and never adopted by the engine). Without the loading
    line, S is returned.
    """
    section = log_text[log_text.rfind(START_MARK) :] if START_MARK in log_text else log_text
    resumed = _RESUMED.findall(section)
    if not resumed:
        return 0
    loaded = _LOADED.findall(section)
    return int(loaded[-1]) if loaded else int(resumed[-1])


def uncovered_checkpoints(log_text: str, complete: set[int]) -> list[int]:
    """The checkpoint steps in ``complete`` newer than the last step ``log_text`` has a metric record
    for: resuming from one would leave the steps in between without history."""
    steps, _ = parse_metrics(log_text)
    last = max(steps, default=0)
    return sorted(step for step in complete if step > last)


def metrics_jsonl(log_text: str) -> str:
    """``metrics.jsonl``: one ``{"step", "metrics"}`` line per step logged (later lines win)."""
    steps, _ = parse_metrics(log_text)
    return "".join(json.dumps({"step": s, "metrics": m}, default=str) + "\n" for s, m in sorted(steps.items()))


JSON_LOGGER_MARK = '"tracker": "json_logger"'


def parse_metrics(log_text: str) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Per-step metrics and summary metrics from Levanter json_logger lines (later lines win)."""
    steps: dict[int, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    for line in log_text.splitlines():
        i = line.find("{")
        if i < 0 or JSON_LOGGER_MARK not in line:
            continue
        try:
            record = json.loads(line[i:])
        except json.JSONDecodeError:
            continue
        if record.get("event") == "log":
            # step None: logged "now" (Levanter's lm-eval harness does so) -- the latest step seen.
            step = int(record["step"]) if record.get("step") is not None else max(steps, default=0)
            steps.setdefault(step, {}).update(_flatten(record.get("metrics", {})))
        elif record.get("event") == "summary":
            summary.update(_flatten(record.get("metrics", {})))
    return steps, summary


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def list_step_dirs(path: str) -> list[tuple[int, str]]:
    """``(N, path)`` for every ``step-N`` directory below ``path``, sorted by N."""
    fs, p = filesystem(path)
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in fs.ls(p, detail=False):
            base = entry.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith("step-") and base[5:].isdigit():
                found.append((int(base[5:]), join_path(path, base)))
    return sorted(found)


def loss_curve_png(steps: Mapping[int, Mapping[str, Any]]) -> bytes | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    train = sorted((s, m["train/loss"]) for s, m in steps.items() if "train/loss" in m)
    evals = sorted((s, m["eval/loss"]) for s, m in steps.items() if "eval/loss" in m)
    if not train:
        return None
    fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
    ax.plot([s for s, _ in train], [v for _, v in train], label="train/loss")
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], "o-", label="eval/loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
