"""Small, storage-agnostic file helpers over fsspec (local folders, gs://, memory://).

Listings are never cached: :func:`filesystem` hands out object-store instances created with
``use_listings_cache=False``. fsspec keeps one gcsfs instance per thread and, by default, that
instance caches every directory listing forever -- a long-lived thread (a Dagster sensor tick, a
runner) that listed a folder once would keep seeing the old listing after another process added
objects. Every ``ls``/``find``/``glob``/``exists``/``isdir`` that goes through :func:`filesystem`
asks the store anew, so no stale listing decides what to do (landing zone, status, leases, dedup).

Every request to an object store has a timeout (:func:`storage_timeout_s`, ``$MARIN_STORAGE_TIMEOUT_S``,
default 30 s): a store that accepts a connection and then sends nothing fails the request instead of
hanging the run (aiohttp's own default waits 5 minutes, and gcsfs retries that 6 times).

Writes to an object store through :func:`open_for_write` are discarded when the block raises
(any ``BaseException``): fsspec's own ``with fs.open(path, "wb")`` uploads the partial buffer on an
exception, which would publish a truncated object.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
from collections.abc import Iterator
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from marin_assets.execution.fence import check_fence
from marin_resources.storage import request_timeout, storage_timeout_s


def join_path(base: str, sub: str | None) -> str:
    """Join ``sub`` below ``base`` with '/' (local paths and URLs alike)."""
    if not sub:
        return base
    return f"{base.rstrip('/')}/{sub.lstrip('/')}"


def local_prefix(prefix: str) -> str:
    """A local folder (a path or a ``file://`` URL) as an absolute path; other URLs as given."""
    if prefix.startswith(("file://", "local://")):
        prefix = prefix.split("://", 1)[1]
    return prefix if "://" in prefix else os.path.abspath(prefix)


def filesystem(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem serving ``path`` and the path as that filesystem names it.

    Object stores come without a directory-listing cache (see the module docstring): what a listing
    or existence check answers is what the store holds now, in every thread. gs:// requests time out
    after :func:`storage_timeout_s` seconds of silence.
    """
    protocol = fsspec.core.split_protocol(path)[0]
    if protocol in (None, "file", "local"):
        return fsspec.core.url_to_fs(path)
    if protocol in ("gs", "gcs"):
        return fsspec.core.url_to_fs(
            path, use_listings_cache=False, requests_timeout=request_timeout(storage_timeout_s())
        )
    return fsspec.core.url_to_fs(path, use_listings_cache=False)


def is_local(path: str) -> bool:
    """True when ``path`` lives on the local filesystem."""
    return isinstance(filesystem(path)[0], LocalFileSystem)


def read_bytes(path: str) -> bytes | None:
    """The content of ``path``, or None when it does not exist."""
    fs, p = filesystem(path)
    try:
        return fs.cat_file(p)
    except FileNotFoundError:
        return None


def read_many(paths: list[str]) -> dict[str, bytes]:
    """Contents of the ``paths`` that exist (missing ones are left out).

    Object stores are read concurrently in one batch (fsspec's async ``cat``): a cached re-run of a
    large graph on gs:// reads all its status files in about the time of one request.
    """
    out: dict[str, bytes] = {}
    by_fs: dict[int, tuple[fsspec.AbstractFileSystem, dict[str, str]]] = {}
    for path in paths:
        fs, p = filesystem(path)
        by_fs.setdefault(id(fs), (fs, {}))[1][p] = path
    for fs, names in by_fs.values():
        if isinstance(fs, LocalFileSystem) or len(names) == 1:
            for path in names.values():
                data = read_bytes(path)
                if data is not None:
                    out[path] = data
            continue
        for p, data in fs.cat(list(names), on_error="omit").items():
            if isinstance(data, bytes):
                out[names.get(p) or names[fs._strip_protocol(p)]] = data
    return out


def read_json(path: str) -> Any:
    """The parsed JSON at ``path`` -- the one contract of every ``read_json`` in the tree.

    Raises FileNotFoundError when ``path`` does not exist and ValueError naming ``path`` when its
    content is not JSON; a caller for whom a missing file is normal catches FileNotFoundError.
    """
    data = read_bytes(path)
    if data is None:
        raise FileNotFoundError(path)
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None


def read_text(path: str) -> str | None:
    """The UTF-8 text of ``path``, or None when it does not exist."""
    data = read_bytes(path)
    return None if data is None else data.decode("utf-8")


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old or the whole new content.

    Local files are written to a temporary sibling and renamed; object stores replace an object
    in one request, which is atomic already. Inside a running step, the write is refused
    (``LeaseLostError``) once the step's lease is lost, so a resumed zombie cannot overwrite the
    outputs of the runner that took over.
    """
    check_fence()
    fs, p = filesystem(path)
    if isinstance(fs, LocalFileSystem):
        directory = os.path.dirname(p)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}-{os.path.basename(p)}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, p)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    else:
        fs.pipe_file(p, data)


@contextlib.contextmanager
def open_for_write(path: str) -> Iterator[IO[bytes]]:
    """A binary file handle whose content appears at ``path`` only if the block ends normally.

    Local files are written to a hidden temporary sibling and renamed; on an object store the
    upload is committed on a normal exit and discarded (never uploaded) when the block raises any
    ``BaseException`` -- also a step cancellation -- so no partial object appears. The running
    step's fence is checked before the commit.
    """
    fs, p = filesystem(path)
    if isinstance(fs, LocalFileSystem):
        directory = os.path.dirname(p)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}-{os.path.basename(p)}")
        try:
            with open(tmp, "wb") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            check_fence()
            os.replace(tmp, p)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    handle = fs.open(p, "wb")
    try:
        yield handle
        check_fence()
    except BaseException:
        discard_upload(handle)
        raise
    handle.close()


def discard_upload(handle: Any) -> None:
    """Drop an object-store upload in progress: nothing appears at its path (not even on ``__del__``)."""
    try:
        handle.discard()  # cancels a started multi-part / resumable upload
    except Exception as exc:  # noqa: BLE001 - already on an error path; marking it closed below is what keeps the object away
        logging.getLogger(__name__).warning("could not cancel the upload to %s: %s", getattr(handle, "path", "?"), exc)
    handle.closed = True  # fsspec files upload on close()/__del__ unless marked closed


def atomic_write_text(path: str, text: str) -> None:
    """Atomically write UTF-8 ``text`` to ``path``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def exists(path: str) -> bool:
    """True when ``path`` exists."""
    fs, p = filesystem(path)
    return bool(fs.exists(p))


def makedirs(path: str) -> None:
    """Create the directory ``path`` (no-op on object stores, which have no directories)."""
    fs, p = filesystem(path)
    fs.makedirs(p, exist_ok=True)


def list_dir(path: str) -> list[dict[str, Any]]:
    """Entries directly below ``path`` (empty when it does not exist)."""
    fs, p = filesystem(path)
    try:
        return list(fs.ls(p, detail=True))
    except FileNotFoundError:
        return []
