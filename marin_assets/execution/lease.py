"""Leases: at most one runner computes an output at a time, across processes and machines.

A lease is a small JSON file next to the output (``.executor_lease``) that its holder refreshes
every ``heartbeat_s`` seconds. A lease whose heartbeat is older than ``stale_s`` -- by its own
timestamp, or because its content did not change for ``stale_s`` seconds of the observer's clock
(robust to clock skew between machines) -- may be taken over.

All writes go through :class:`LeaseBackend`, the only part that depends on the storage: it needs
an exclusive create and a compare-and-swap. :class:`LocalLeaseBackend` implements them on a POSIX
filesystem (shared by processes, or by machines through a filesystem with atomic rename/link);
an object store implements them with generation preconditions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Protocol

from marin_assets.execution.status import LEASE_FILE
from marin_assets.execution.storage import filesystem, is_local, join_path

logger = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_S = 30.0
DEFAULT_STALE_S = 90.0


class LeaseBackend(Protocol):
    """Atomic primitives a lease needs from the storage."""

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` unless it exists; True when this call created it."""
        ...

    def read(self, path: str) -> tuple[bytes, str] | None:
        """``(content, token)`` of ``path``, or None. The token changes whenever the content does."""
        ...

    def replace_if(self, path: str, token: str, data: bytes) -> bool:
        """Replace ``path`` by ``data`` only if its token is still ``token``."""
        ...

    def delete_if(self, path: str, token: str) -> bool:
        """Delete ``path`` only if its token is still ``token``."""
        ...


class LocalLeaseBackend:
    """Lease primitives on a local (or POSIX network) filesystem.

    Exclusive create uses ``link(2)`` of a fully written temporary file, so a reader never sees a
    half-written lease. Compare-and-swap runs inside a short critical section guarded by an
    ``O_EXCL`` mutex file; a mutex older than ``mutex_stale_s`` (its holder died inside the few
    milliseconds of the section) is broken.
    """

    def __init__(self, mutex_stale_s: float = 10.0) -> None:
        self.mutex_stale_s = mutex_stale_s

    @staticmethod
    def _token(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    @staticmethod
    def _write_tmp(path: str, data: bytes) -> str:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-lease-{uuid.uuid4().hex}")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return tmp

    def create_exclusive(self, path: str, data: bytes) -> bool:
        tmp = self._write_tmp(path, data)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def read(self, path: str) -> tuple[bytes, str] | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        return data, self._token(data)

    @contextlib.contextmanager
    def _mutex(self, path: str):
        mutex = f"{path}.mutex"
        deadline = time.monotonic() + 4 * self.mutex_stale_s
        while True:
            try:
                fd = os.open(mutex, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.close(fd)
                break
            except FileExistsError:
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - os.stat(mutex).st_mtime > self.mutex_stale_s:
                        os.unlink(mutex)
                        continue
                if time.monotonic() > deadline:
                    raise TimeoutError(f"could not lock {mutex}") from None
                time.sleep(0.005)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(mutex)

    def replace_if(self, path: str, token: str, data: bytes) -> bool:
        with self._mutex(path):
            current = self.read(path)
            if current is None or current[1] != token:
                return False
            tmp = self._write_tmp(path, data)
            os.replace(tmp, path)
            return True

    def delete_if(self, path: str, token: str) -> bool:
        with self._mutex(path):
            current = self.read(path)
            if current is None or current[1] != token:
                return False
            os.unlink(path)
            return True


def backend_for(path: str) -> LeaseBackend:
    """The lease backend for the storage of ``path``."""
    if is_local(path):
        return LocalLeaseBackend()
    fs, _ = filesystem(path)
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    raise NotImplementedError(f"no lease backend for {protocol}:// storage yet (path {path})")


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease, as written in the lease file."""

    owner: str
    host: str
    pid: int
    heartbeat: float
    seq: int


class StepLease:
    """A lease on one output path, with a background heartbeat while held."""

    def __init__(
        self,
        path: str,
        backend: LeaseBackend | None = None,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        stale_s: float = DEFAULT_STALE_S,
        owner: str | None = None,
    ) -> None:
        if stale_s <= heartbeat_s:
            raise ValueError(f"stale_s ({stale_s}) must exceed heartbeat_s ({heartbeat_s})")
        self.path = path
        self.backend = backend if backend is not None else backend_for(path)
        self.heartbeat_s = heartbeat_s
        self.stale_s = stale_s
        self.owner = owner or uuid.uuid4().hex
        self.lost = threading.Event()
        self._token: str | None = None
        self._seq = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # token -> monotonic time we first saw it; a token unchanged for stale_s is stale even if
        # the writer's clock runs ahead of ours.
        self._first_seen: dict[str, float] = {}

    def _content(self) -> bytes:
        self._seq += 1
        return json.dumps(
            {
                "owner": self.owner,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "heartbeat": time.time(),
                "seq": self._seq,
            }
        ).encode("utf-8")

    @staticmethod
    def _parse(data: bytes) -> LeaseHolder | None:
        try:
            raw = json.loads(data)
            return LeaseHolder(
                str(raw["owner"]), str(raw["host"]), int(raw["pid"]), float(raw["heartbeat"]), int(raw["seq"])
            )
        except (ValueError, KeyError, TypeError):
            return None

    def holder(self) -> LeaseHolder | None:
        """The current holder, or None when nobody holds the lease."""
        current = self.backend.read(self.path)
        return None if current is None else self._parse(current[0])

    def _is_stale(self, data: bytes, token: str) -> bool:
        holder = self._parse(data)
        if holder is None:
            return True  # unreadable lease: treat as abandoned
        if time.time() - holder.heartbeat > self.stale_s:
            return True
        first = self._first_seen.setdefault(token, time.monotonic())
        return time.monotonic() - first > self.stale_s

    def is_held_by_other(self) -> bool:
        """True when someone else holds a live (non-stale) lease."""
        current = self.backend.read(self.path)
        if current is None:
            return False
        holder = self._parse(current[0])
        if holder is not None and holder.owner == self.owner:
            return False
        return not self._is_stale(*current)

    def try_acquire(self) -> bool:
        """Take the lease if it is free or stale; never blocks on another holder."""
        with self._lock:
            for _ in range(3):
                data = self._content()
                if self.backend.create_exclusive(self.path, data):
                    self._token = self.backend.read(self.path)[1]  # type: ignore[index]
                    self._start_heartbeat()
                    return True
                current = self.backend.read(self.path)
                if current is None:
                    continue  # released between our two calls: try the create again
                if not self._is_stale(*current):
                    return False
                previous = self._parse(current[0])
                if self.backend.replace_if(self.path, current[1], data):
                    logger.warning(
                        "took over stale lease %s (holder %s pid %s on %s)",
                        self.path,
                        previous.owner if previous else "?",
                        previous.pid if previous else "?",
                        previous.host if previous else "?",
                    )
                    self._token = self.backend.read(self.path)[1]  # type: ignore[index]
                    self._start_heartbeat()
                    return True
            return False

    def _start_heartbeat(self) -> None:
        self.lost.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lease-heartbeat:{self.path}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                if self._token is None:
                    return
                data = self._content()
                try:
                    ok = self.backend.replace_if(self.path, self._token, data)
                except OSError as exc:  # transient storage error: retry at the next beat
                    logger.warning("lease heartbeat on %s failed: %s", self.path, exc)
                    continue
                if not ok:
                    logger.error("lost lease %s: another runner took it over", self.path)
                    self.lost.set()
                    self._token = None
                    return
                self._token = self.backend.read(self.path)[1]  # type: ignore[index]

    def release(self) -> None:
        """Stop the heartbeat and delete the lease if we still hold it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 5)
        with self._lock:
            if self._token is not None:
                with contextlib.suppress(OSError):
                    self.backend.delete_if(self.path, self._token)
                self._token = None


def lease_for_output(
    output_path: str, heartbeat_s: float = DEFAULT_HEARTBEAT_S, stale_s: float = DEFAULT_STALE_S
) -> StepLease:
    """The lease of a step output folder (``<output>/.executor_lease``) on its storage's backend."""
    path = join_path(output_path, LEASE_FILE)
    if is_local(path):
        path = filesystem(path)[1]  # the local backend works on plain OS paths, not file:// URLs
    return StepLease(path, backend_for(path), heartbeat_s, stale_s)
