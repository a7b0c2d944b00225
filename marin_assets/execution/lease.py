"""Leases: at most one runner computes an output at a time, across processes and machines.

A lease is a small JSON object next to the output (``.executor_lease``) that its holder refreshes
every ``heartbeat_s`` seconds by compare-and-swap. Another runner may take it over when

* its content did not change for ``stale_s`` seconds of the *observer's own monotonic clock* (how
  long since this runner saw the heartbeat change) -- the wall-clock timestamp written into the
  lease is never compared with another host's clock, so a clock an hour off on either side can
  neither keep a dead lease alive nor make a live one look stale; or
* its holder is provably dead: same host, same boot (boot id) and pid namespace, and the pid is gone
  or now belongs to a process started later (pid reuse). That takeover is immediate.

All writes go through a :class:`~marin_assets.execution.conditional.LeaseBackend` (exclusive
create, compare-and-swap): POSIX folders, gs:// (generation preconditions), memory://.

A held lease is also the *fence* of its step (:mod:`marin_assets.execution.fence`): when a renewal
fails because someone else took the lease over, the lease is marked lost and every registered
callback runs -- the runner cancels an in-process step, subprocess runners kill their process
group, Ray launches cancel their task -- and the runner records nothing for that step.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from marin_assets.execution.conditional import (
    LeaseBackend,
    LocalLeaseBackend,
    MemoryLeaseBackend,
    UnsupportedStorageError,
    backend_for,
)
from marin_assets.execution.fence import LeaseLostError, StepCancelled, activate
from marin_assets.execution.gcs import GCSLeaseBackend
from marin_assets.execution.status import LEASE_FILE, host_id
from marin_assets.execution.storage import filesystem, is_local, join_path

__all__ = [
    "DEFAULT_HEARTBEAT_S",
    "Clock",
    "SYSTEM_CLOCK",
    "SystemClock",
    "host_id",
    "DEFAULT_STALE_S",
    "GCSLeaseBackend",
    "LeaseBackend",
    "LeaseHolder",
    "LeaseLostError",
    "LocalLeaseBackend",
    "MemoryLeaseBackend",
    "StepLease",
    "UnsupportedStorageError",
    "backend_for",
    "guard_remote",
    "lease_for_output",
]

logger = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_S = 30.0
DEFAULT_STALE_S = 90.0


class Clock(Protocol):
    """The time source of a lease: wall time (written into the lease), monotonic time (ages this
    process measures itself) and the heartbeat's wait."""

    def time(self) -> float:
        """Seconds since the epoch: written into the lease for people to read, never compared with
        another host's clock (staleness is measured on :meth:`monotonic`)."""
        ...

    def monotonic(self) -> float:
        """A clock that never goes back (ages measured in this process)."""
        ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; True when the event is set."""
        ...

    def starting(self, thread: threading.Thread) -> None:
        """``thread`` (about to start) will wait on this clock (a heartbeat)."""
        ...


class SystemClock:
    """The real clocks (the default)."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(seconds)

    def starting(self, thread: threading.Thread) -> None:
        pass


SYSTEM_CLOCK = SystemClock()


@functools.cache
def boot_id() -> str:
    """This kernel boot's id ("" where /proc does not have it): pids are only unique within a boot."""
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id") as handle:
        return handle.read().strip()
    return ""


@functools.cache
def pid_namespace() -> str:
    """This process's pid namespace ("" when unknown): a pid means nothing in another namespace."""
    with contextlib.suppress(OSError):
        return os.readlink("/proc/self/ns/pid")
    return ""


def process_start_ticks(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may contain spaces and parentheses
    if not fields or fields[0] in ("Z", "X"):  # exited, not yet reaped: as dead as it gets
        return None
    return int(fields[19])


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease, as written in the lease file."""

    owner: str
    host: str
    pid: int
    heartbeat: float
    seq: int
    boot_id: str = ""
    pid_namespace: str = ""
    start_ticks: int | None = None

    def is_provably_dead(self) -> bool:
        """True when the holder ran on this machine (same boot, same pid namespace) and is gone.

        A pid that now belongs to a process started at another time is a reused pid: dead too.
        On another host, or without boot id / namespace, nothing is provable (False).
        """
        if self.host != host_id() or not self.boot_id or self.boot_id != boot_id():
            return False
        if not self.pid_namespace or self.pid_namespace != pid_namespace():
            return False
        start = process_start_ticks(self.pid)
        return start is None or (self.start_ticks is not None and start != self.start_ticks)


def _async_raise(thread_id: int, exc_type: type[BaseException]) -> None:
    """Raise ``exc_type`` in another thread at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc_type))


class StepLease:
    """A lease on one output path, with a background heartbeat while held; the step's fence.

    ``clock`` is the time source of everything timed here -- the heartbeat written into the lease,
    staleness, the heartbeat period, the "silent too long" check -- so tests drive a lease with a
    manual clock (``tests/manual_clock.py``) instead of sleeping. The holder's identity written into the lease is its
    owner id, host (:func:`host_id`), pid, boot id, pid namespace and process start time.
    """

    def __init__(
        self,
        path: str,
        backend: LeaseBackend | None = None,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        stale_s: float = DEFAULT_STALE_S,
        owner: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if stale_s <= heartbeat_s:
            raise ValueError(f"stale_s ({stale_s}) must exceed heartbeat_s ({heartbeat_s})")
        self.path = path
        self.backend = backend if backend is not None else backend_for(path)
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.owner = owner or uuid.uuid4().hex
        self.clock = clock
        self.lost = threading.Event()
        self._token: str | None = None
        self._renewed_at = 0.0  # monotonic time of the last confirmed write of the lease
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], Any]] = {}
        self._callback_ids = iter(range(1 << 62))
        # The lease's current token -> monotonic time we first saw it: a token unchanged for
        # stale_s of our own clock is stale (whatever the writer's wall clock says). One entry: a
        # token never comes back (generations and sequence numbers only grow).
        self._first_seen: dict[str, float] = {}
        self.previous_holder: LeaseHolder | None = None
        self.took_over_live_holder = False
        # What was observed when the lease was lost (for every message that reports the loss).
        self.lost_reason = ""

    # ------------------------------------------------------------------ content
    def _content(self) -> bytes:
        self._seq += 1
        pid = os.getpid()
        return json.dumps(
            {
                "owner": self.owner,
                "host": host_id(),
                "pid": pid,
                "boot_id": boot_id(),
                "pid_namespace": pid_namespace(),
                "start_ticks": process_start_ticks(pid),
                "heartbeat": self.clock.time(),
                "seq": self._seq,
            }
        ).encode("utf-8")

    @staticmethod
    def _parse(data: bytes) -> LeaseHolder | None:
        try:
            raw = json.loads(data)
            start = raw.get("start_ticks")
            return LeaseHolder(
                str(raw["owner"]),
                str(raw["host"]),
                int(raw["pid"]),
                float(raw["heartbeat"]),
                int(raw["seq"]),
                str(raw.get("boot_id") or ""),
                str(raw.get("pid_namespace") or ""),
                int(start) if start is not None else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    @classmethod
    def _written_by_dead(cls, data: bytes) -> bool:
        """Whether lease content names a provably dead holder (its leftover temporary file may go)."""
        holder = cls._parse(data)
        return holder is not None and holder.is_provably_dead()

    def holder(self) -> LeaseHolder | None:
        """The current holder, or None when nobody holds the lease."""
        current = self.backend.read(self.path)
        return None if current is None else self._parse(current[0])

    def _is_stale(self, data: bytes, token: str) -> bool:
        """Stale: unreadable, written by a provably dead holder, or unchanged for ``stale_s`` of
        this observer's monotonic clock. The holder's ``heartbeat`` timestamp is not consulted:
        it comes from another host's wall clock (an hour off would make a live lease look stale)."""
        holder = self._parse(data)
        if holder is None:
            return True  # unreadable lease: treat as abandoned
        if holder.is_provably_dead():
            return True
        now = self.clock.monotonic()
        first = self._first_seen.get(token)
        if first is None:
            first = now
            self._first_seen = {token: now}
        return now - first > self.stale_s

    def is_held_by_other(self) -> bool:
        """True when someone else holds a live (non-stale, not provably dead) lease."""
        current = self.backend.read(self.path)
        if current is None:
            return False
        holder = self._parse(current[0])
        if holder is not None and holder.owner == self.owner:
            return False
        return not self._is_stale(*current)

    # ------------------------------------------------------------------ acquire / renew / release
    def _held(self, token: str, previous: LeaseHolder | None = None, stale_holder: bool = False) -> bool:
        # Whether the previous holder may still be writing: it lost the lease to staleness while
        # alive (paused, cut off, on another host). Its attempt's staged output is then adopted
        # only by copying it (execution.attempt.copy_attempt), never in place.
        self.took_over_live_holder = stale_holder
        self.previous_holder = previous
        self._token = token
        self._renewed_at = self.clock.monotonic()
        self._start_heartbeat()
        return True

    def try_acquire(self) -> bool:
        """Take the lease if it is free, stale or its holder is dead; never blocks on a live holder."""
        with self._lock:
            cleanup = getattr(self.backend, "remove_leftover_tmp", None)
            if cleanup is not None:  # a SIGKILLed writer's temporary lease file, left beside it
                with contextlib.suppress(OSError):
                    cleanup(self.path, self._written_by_dead)
            for _ in range(3):
                data = self._content()
                token = self.backend.create_exclusive(self.path, data)
                if token is not None:
                    return self._held(token)
                current = self.backend.read(self.path)
                if current is None:
                    continue  # released between our two calls: try the create again
                previous = self._parse(current[0])
                if previous is not None and previous.owner == self.owner and previous.seq == self._seq:
                    return self._held(current[1])  # our own create, answered 412 on a retry
                if not self._is_stale(*current):
                    return False
                token = self.backend.replace_if(self.path, current[1], data)
                if token is not None:
                    dead = previous is not None and previous.is_provably_dead()
                    logger.warning(
                        "took over %s lease %s (holder %s pid %s on %s)",
                        "dead holder's" if dead else "stale",
                        self.path,
                        previous.owner if previous else "?",
                        previous.pid if previous else "?",
                        previous.host if previous else "?",
                    )
                    return self._held(token, previous, stale_holder=not dead)
            return False

    def _start_heartbeat(self) -> None:
        self.lost.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lease-heartbeat:{self.path}", daemon=True)
        self.clock.starting(self._thread)
        self._thread.start()

    def _renew_locked(self) -> bool | None:
        """One compare-and-swap renewal (caller holds ``_lock``): True ok, False lost, None unknown."""
        if self._token is None:
            return False
        try:
            token = self.backend.replace_if(self.path, self._token, self._content())
        except Exception as exc:  # noqa: BLE001 - storage unreachable or refusing: unknown, the next beat retries
            # (check() declares the lease lost once no renewal reached the store for stale_s.)
            logger.warning("lease heartbeat on %s failed: %s", self.path, exc)
            return None
        if token is None:
            self._token = None
            return False
        self._token = token
        self._renewed_at = self.clock.monotonic()
        return True

    def observed_loss(self) -> str:
        """What the lease object says now, for a renewal or check that found it no longer ours."""
        try:
            current = self.backend.read(self.path)
        except OSError as exc:
            return f"the lease could not be read back ({exc})"
        if current is None:
            return "the lease file was deleted (no runner holds it)"
        holder = self._parse(current[0])
        if holder is None:
            return "the lease file holds something unreadable"
        if holder.owner == self.owner:
            return "the lease was rewritten with our own id (a retried write)"
        return f"another runner took it over (owner {holder.owner[:12]} on host {holder.host}, pid {holder.pid})"

    def _beat(self) -> None:
        while not self.clock.wait(self._stop, self.heartbeat_s):
            with self._lock:
                if self._token is None:
                    return
                renewed = self._renew_locked()
            if renewed is False:
                self._mark_lost(self.observed_loss())
                return

    def _mark_lost(self, why: str) -> None:
        with self._lock:
            self._token = None
            if self.lost.is_set():
                return
            self.lost_reason = why
            self.lost.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        logger.error("lost lease %s: %s; stopping the step, recording nothing", self.path, why)
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:  # noqa: BLE001 - one failing callback must not stop the others
                logger.warning("lease-lost callback %r failed: %s", callback, exc)

    def cancel(self, why: str) -> bool:
        """Give up a held lease while its step runs (the run driving it was terminated): the step is
        stopped as on a lost lease (its lease-lost callbacks cancel a Ray task or kill a subprocess,
        an in-process step gets :class:`StepCancelled`, nothing is recorded) and the lease file is
        deleted, so a task that fences itself on a Ray worker (:func:`guard_remote`) sees it gone
        and ends. A lease this runner does not hold is left alone. Returns whether it was held."""
        with self._lock:
            token = self._token
        if token is None:
            return False
        self._mark_lost(why)
        with contextlib.suppress(OSError):
            self.backend.delete_if(self.path, token)
        return True

    def release(self) -> None:
        """Stop the heartbeat and delete the lease if we still hold it -- also one given up as lost
        that still names us (no renewal reached the store for ``stale_s``, or a write whose answer
        never came): a runner that stops leaves no lease behind that others must wait out."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.heartbeat_s + 5)
        with self._lock:
            token = self._token
            try:
                if token is None and self.lost.is_set():
                    current = self.backend.read(self.path)
                    holder = None if current is None else self._parse(current[0])
                    if current is not None and holder is not None and holder.owner == self.owner:
                        token = current[1]  # still ours: our step is stopped, free it for the next runner
                if token is not None:
                    self.backend.delete_if(self.path, token)
            except OSError as exc:
                # The store is unreachable: the lease stays until it is stale_s old to the next runner.
                logger.warning("could not release lease %s: %s (it goes stale in %gs)", self.path, exc, self.stale_s)
            self._token = None
            self._callbacks.clear()

    # ------------------------------------------------------------------ fence
    def lost_error(self) -> LeaseLostError:
        """The error that reports this lease's loss with what was observed."""
        return LeaseLostError(f"lease {self.path} was lost: {self.lost_reason or 'reason unknown'}")

    def check(self) -> None:
        """Raise LeaseLostError when the lease is lost; renew synchronously when the last confirmed
        renewal is old (this process may have been paused), so a resumed zombie stops here."""
        if self.lost.is_set():
            raise self.lost_error()
        if self.clock.monotonic() - self._renewed_at <= max(1.5 * self.heartbeat_s, self.stale_s / 2):
            return
        with self._lock:
            renewed = self._renew_locked() if self._token is not None else False
        silent_s = self.clock.monotonic() - self._renewed_at
        if renewed is False:
            self._mark_lost(f"{self.observed_loss()}, found after {silent_s:.0f}s without a confirmed renewal")
            raise self.lost_error()
        if renewed is None and silent_s > self.stale_s:
            self._mark_lost(
                f"no renewal reached the store for {silent_s:.0f}s (more than stale_s={self.stale_s:g}s): "
                "another runner may take it over"
            )
            raise self.lost_error()

    def verify(self) -> None:
        """Read the lease back; raise LeaseLostError unless we still hold it (before status writes).

        The read and the comparison with our token happen under the lock the heartbeat renews
        under: a renewal between them would otherwise change the token and look like a takeover.
        """
        self.check()
        with self._lock:
            current = self.backend.read(self.path)
            held = current is not None and self._token is not None and current[1] == self._token
        if not held:
            self._mark_lost(self.observed_loss())
            raise self.lost_error()

    def on_lost(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback`` once if the lease is lost (at once if it already is); returns an unregister."""
        with self._lock:
            if not self.lost.is_set():
                key = next(self._callback_ids)
                self._callbacks[key] = callback
                return lambda: self._callbacks.pop(key, None)
        callback()
        return lambda: None

    @contextlib.contextmanager
    def fencing(self) -> Iterator[None]:
        """Run an in-process step under this lease: it is the thread's active fence, and losing the
        lease raises :class:`~marin_assets.execution.fence.StepCancelled` in this thread."""
        target = threading.get_ident()
        guard = threading.Lock()
        armed = [True]  # the step may still be cancelled

        def cancel() -> None:
            if threading.get_ident() == target:
                return  # lost while checking in the step's own thread: check() raises already
            with guard:
                if armed[0]:
                    armed[0] = False
                    _async_raise(target, StepCancelled)

        unregister = self.on_lost(cancel)
        try:
            with activate(self):
                yield
        finally:
            with guard:
                armed[0] = False
            unregister()


def guard_remote(fn: Callable[[Any], Any], lease: StepLease) -> Callable[[Any], Any]:
    """Wrap a step function that runs as a Ray task so that the task fences itself.

    While ``fn`` runs, a thread in the worker reads the lease every ``heartbeat_s``; once the lease
    is gone or held by another owner, it ends the worker process at once (``os._exit``). This stops
    the task wherever it runs -- also when the driver is frozen or cut off from the worker, and for
    tasks launched through an accelerator config, whose ObjectRef the runner never sees.
    """
    path, owner, every = lease.path, lease.owner, lease.heartbeat_s

    def fenced(config: Any) -> Any:
        current = backend_for(path).read(path)
        holder = StepLease._parse(current[0]) if current is not None else None
        if holder is None or holder.owner != owner:  # e.g. a retry of a task this guard ended
            raise LeaseLostError(f"lease {path} is no longer held by the runner that launched this task")
        stop = threading.Event()

        def watch() -> None:
            backend = backend_for(path)
            while not stop.wait(every):
                try:
                    current = backend.read(path)
                except OSError:
                    continue  # transient: the next look decides
                holder = StepLease._parse(current[0]) if current is not None else None
                if not stop.is_set() and (holder is None or holder.owner != owner):
                    logger.error("lease %s lost: ending this Ray worker (pid %d)", path, os.getpid())
                    os._exit(75)

        threading.Thread(target=watch, name="marin-remote-fence", daemon=True).start()
        try:
            return fn(config)
        finally:
            stop.set()

    fenced.__name__ = getattr(fn, "__name__", "step")
    return fenced


def lease_for_output(
    output_path: str,
    heartbeat_s: float = DEFAULT_HEARTBEAT_S,
    stale_s: float = DEFAULT_STALE_S,
    clock: Clock = SYSTEM_CLOCK,
) -> StepLease:
    """The lease of a step output folder (``<output>/.executor_lease``) on its storage's backend."""
    path = join_path(output_path, LEASE_FILE)
    if is_local(path):
        path = filesystem(path)[1]  # the local backend works on plain OS paths, not file:// URLs
    return StepLease(path, backend_for(path), heartbeat_s, stale_s, clock=clock)
