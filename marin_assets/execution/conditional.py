"""Conditional writes: the storage primitives that leases and status files rely on.

Two runners must never both believe they own an output, and a runner that lost its lease must not
be able to flip a status file. Both need the same four primitives from the storage, expressed by
:class:`LeaseBackend`:

* ``create_exclusive`` -- create an object only if it does not exist;
* ``read`` -- content plus a *token* that changes whenever the content does;
* ``replace_if`` / ``delete_if`` -- compare-and-swap on that token.

Implementations: :class:`LocalLeaseBackend` (POSIX folders: ``link(2)`` plus a short ``O_EXCL``
critical section), :class:`GCSLeaseBackend` (``gs://``: object generations with
``ifGenerationMatch`` preconditions, in ``marin_assets.execution.gcs``) and
:class:`MemoryLeaseBackend` (``memory://``, one process). :func:`backend_for` picks one from a path
and raises :class:`UnsupportedStorageError` for a store that cannot do conditional writes -- the
runner calls it once before the first step, so such a prefix fails at startup, not per step.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Protocol

import fsspec

from marin_assets.execution.storage import filesystem, is_local

SUPPORTED_STORAGE = "a local or POSIX network folder, gs:// (Google Cloud Storage) or memory:// (tests)"


class UnsupportedStorageError(RuntimeError):
    """The storage of a prefix cannot do the conditional writes that leases and status files need."""


class LeaseBackend(Protocol):
    """Atomic primitives a lease (and a fenced status file) needs from the storage.

    Tokens are opaque strings: a content hash on a filesystem, the object generation on GCS.
    """

    def create_exclusive(self, path: str, data: bytes) -> str | None:
        """Create ``path`` with ``data`` unless it exists; the new token, or None when it existed."""
        ...

    def read(self, path: str) -> tuple[bytes, str] | None:
        """``(content, token)`` of ``path``, or None. The token changes whenever the content does."""
        ...

    def replace_if(self, path: str, token: str, data: bytes) -> str | None:
        """Replace ``path`` by ``data`` only if its token is still ``token``; the new token or None."""
        ...

    def delete_if(self, path: str, token: str) -> bool:
        """Delete ``path`` only if its token is still ``token``."""
        ...


def content_token(data: bytes) -> str:
    """The token of a file on stores without generations: a hash of its content."""
    return hashlib.sha256(data).hexdigest()


class LocalLeaseBackend:
    """Conditional writes on a local (or POSIX network) filesystem.

    Exclusive create uses ``link(2)`` of a fully written temporary file, so a reader never sees a
    half-written file. Compare-and-swap runs inside a short critical section guarded by an
    ``O_EXCL`` mutex file; a mutex this process keeps finding unchanged for ``mutex_stale_s`` of
    its own monotonic clock (its holder died inside the few milliseconds of the section) is broken.
    """

    def __init__(self, mutex_stale_s: float = 10.0, tmp_stale_s: float = 60.0) -> None:
        self.mutex_stale_s = mutex_stale_s
        self.tmp_stale_s = tmp_stale_s

    def remove_leftover_tmp(self, path: str, written_by_dead: Callable[[bytes], bool] | None = None) -> int:
        """Delete the ``.tmp-lease-*`` files beside ``path`` that a killed process left (it died
        between writing one and linking/renaming it); returns how many were removed.

        A file goes when ``written_by_dead(content)`` says its writer is provably dead (at once), or
        when it is older than ``tmp_stale_s`` -- a live writer links or renames its temporary file
        within milliseconds.
        """
        directory = os.path.dirname(path) or "."
        removed = 0
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return 0
        now = time.time()
        for name in names:
            if not name.startswith(".tmp-lease-"):
                continue
            full = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                old = now - os.stat(full).st_mtime > self.tmp_stale_s
                if not old and written_by_dead is not None:
                    with open(full, "rb") as handle:
                        old = written_by_dead(handle.read(65536))
                if old:
                    os.unlink(full)
                    removed += 1
        return removed

    @staticmethod
    def _write_tmp(path: str, data: bytes) -> str:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-lease-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            # A full disk (ENOSPC) fails the write after open() created the file: never leave it.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    @staticmethod
    def _rewrite_in_place(path: str, data: bytes) -> None:
        """Overwrite ``path``'s content without allocating a new file (full disk: the fallback).

        The blocks the file already has are reused (a status file's record fits in the page it
        already occupies); a reader racing this write may see a torn record, which parses as no
        status -- the same as a status that was never written, never a false SUCCESS.
        """
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data)
            os.ftruncate(fd, len(data))
            os.fsync(fd)
        finally:
            os.close(fd)

    def create_exclusive(self, path: str, data: bytes) -> str | None:
        tmp = self._write_tmp(path, data)
        try:
            os.link(tmp, path)
            return content_token(data)
        except FileExistsError:
            return None
        finally:
            os.unlink(tmp)

    def read(self, path: str) -> tuple[bytes, str] | None:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            return None
        return data, content_token(data)

    @contextlib.contextmanager
    def _mutex(self, path: str):
        mutex = f"{path}.mutex"
        deadline = time.monotonic() + 4 * self.mutex_stale_s
        # The mutex we keep finding, and since when (our monotonic clock): broken once the same file
        # stays for mutex_stale_s. Not its mtime against our wall clock -- on a network folder the
        # mtime comes from another machine's clock, and a skewed one would break a live mutex.
        seen: tuple[int, int] | None = None
        since = time.monotonic()
        while True:
            try:
                fd = os.open(mutex, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.close(fd)
                break
            except FileExistsError:
                with contextlib.suppress(FileNotFoundError):
                    stat = os.stat(mutex)
                    identity = (stat.st_ino, stat.st_mtime_ns)
                    if identity != seen:
                        seen, since = identity, time.monotonic()
                    elif time.monotonic() - since > self.mutex_stale_s:
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

    def replace_if(self, path: str, token: str, data: bytes) -> str | None:
        with self._mutex(path):
            current = self.read(path)
            if current is None or current[1] != token:
                return None
            try:
                tmp = self._write_tmp(path, data)
            except OSError as exc:
                full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
                if not full or len(data) > os.stat(path).st_blocks * 512:  # only within its blocks
                    raise
                # No room for a new file: reuse the old one's blocks (a status file recording
                # FAILED on a full disk, a lease renewal), still under the compare-and-swap mutex.
                self._rewrite_in_place(path, data)
                return content_token(data)
            os.replace(tmp, path)
            return content_token(data)

    def delete_if(self, path: str, token: str) -> bool:
        with self._mutex(path):
            current = self.read(path)
            if current is None or current[1] != token:
                return False
            os.unlink(path)
            return True


class MemoryLeaseBackend:
    """Conditional writes on fsspec's ``memory://`` filesystem (one process: a lock suffices)."""

    _lock = threading.Lock()

    def __init__(self) -> None:
        self.fs, _ = filesystem("memory://")

    def _read(self, path: str) -> tuple[bytes, str] | None:
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            return None
        return data, content_token(data)

    def create_exclusive(self, path: str, data: bytes) -> str | None:
        with self._lock:
            if self.fs.exists(path):
                return None
            self.fs.pipe_file(path, data)
            return content_token(data)

    def read(self, path: str) -> tuple[bytes, str] | None:
        with self._lock:
            return self._read(path)

    def replace_if(self, path: str, token: str, data: bytes) -> str | None:
        with self._lock:
            current = self._read(path)
            if current is None or current[1] != token:
                return None
            self.fs.pipe_file(path, data)
            return content_token(data)

    def delete_if(self, path: str, token: str) -> bool:
        with self._lock:
            current = self._read(path)
            if current is None or current[1] != token:
                return False
            self.fs.rm_file(path)
            return True


def storage_protocol(path: str) -> str:
    """The fsspec protocol serving ``path`` (``file`` for local paths)."""
    fs, _ = filesystem(path)
    return fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]


def backend_for(path: str) -> LeaseBackend:
    """The conditional-write backend for the storage of ``path``.

    Raises:
        UnsupportedStorageError: the storage cannot create-if-absent and compare-and-swap, so two
            runners could both compute (and record) the same output.
    """
    # Decided from the URL's scheme first, so that an unsupported store is refused before its
    # fsspec driver is imported (or found missing) and before anything is read or written there.
    scheme = fsspec.core.split_protocol(path)[0]
    if scheme not in (None, "file", "local", "gs", "gcs", "memory"):
        raise UnsupportedStorageError(
            f"storage {scheme}:// (prefix {path}) cannot do the conditional writes (create-if-absent, "
            "compare-and-swap) that keep two runners off one output and a stale runner from flipping a "
            f"status; use {SUPPORTED_STORAGE}"
        )
    if is_local(path):
        return LocalLeaseBackend()
    protocol = storage_protocol(path)
    if protocol in {"gs", "gcs"}:
        from marin_assets.execution.gcs import GCSLeaseBackend

        return GCSLeaseBackend(path)
    if protocol == "memory":
        return MemoryLeaseBackend()
    raise UnsupportedStorageError(
        f"storage {protocol}:// (prefix {path}) cannot do the conditional writes (create-if-absent, "
        "compare-and-swap) that keep two runners off one output and a stale runner from flipping a "
        f"status; use {SUPPORTED_STORAGE}"
    )
