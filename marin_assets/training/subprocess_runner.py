"""The one way train and eval steps run a subprocess: it never outlives its runner.

A trainer that survives its runner is a second writer on the checkpoint folder once another runner
takes the step over. So every subprocess started here

* runs in its own session / process group (one ``killpg`` stops it and whatever it started);
* gets ``PR_SET_PDEATHSIG = SIGKILL`` (Linux): the kernel kills it when the runner dies, even by
  ``kill -9`` -- there is no parent left to clean up;
* is killed (its whole group) when the step's lease is lost (:mod:`marin_assets.execution.fence`),
  when it runs past its timeout, and when the waiting step is cancelled.

Left outside: grandchildren that a subprocess starts in another session of their own are not in
its process group, and the parent-death signal reaches only the direct child.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

from marin_assets.execution.fence import on_lease_lost

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


def start(cmd: Sequence[str], log_path: str, env: Mapping[str, str]) -> subprocess.Popen:
    """Start ``cmd`` with stdout and stderr appended to ``log_path``; it dies with this process and
    with the running step's lease. Pair with :func:`wait`."""
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
    return proc


def wait(proc: subprocess.Popen, timeout_s: float | None) -> int:
    """Wait for ``proc``; kill its group on timeout (``subprocess.TimeoutExpired``) or cancellation."""
    try:
        return proc.wait(timeout=timeout_s)
    except BaseException:
        kill_group(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        raise
    finally:
        getattr(proc, "unregister_fence", lambda: None)()


def run(cmd: Sequence[str], log_path: str, env: Mapping[str, str], timeout_s: float | None) -> str:
    """Run ``cmd`` to completion (see :func:`start`); return its log, raise RuntimeError when it fails."""
    proc = start(cmd, log_path, env)
    rc = wait(proc, timeout_s)
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    if rc != 0:
        raise RuntimeError(f"{' '.join(list(cmd)[:4])} exited with {rc}; log {log_path}:\n{text[-4000:]}")
    return text
