"""Conditional writes on Google Cloud Storage: object generations and ``ifGenerationMatch``.

Every GCS object has a *generation* that changes on each write. A write with
``ifGenerationMatch=0`` succeeds only when the object does not exist (create-if-absent); with
``ifGenerationMatch=G`` only when the live object is still generation ``G`` (compare-and-swap);
otherwise the server answers 412. That is all a lease and a fenced status file need, and no rename
is involved (GCS has none).

Uploads use the JSON API's multipart upload (one request carrying metadata and content), through
gcsfs's authenticated session: the same credentials and ``STORAGE_EMULATOR_HOST`` handling as every
other gs:// access of the engine.

**Did my write land?** A conditional write answered by a transient error (503, 429, a reset
connection, a timeout) may have been applied anyway. gcsfs would retry it, and the retry -- now
against the generation the first request created -- gets 412: a write that succeeded would read
as "someone else won", a renewal as a lost lease. So each conditional request is sent once, without
gcsfs's retries, and a transient answer is resolved by reading the object back: our exact bytes
there mean the write landed (its generation is the new token); the object still as we expected
means it did not (sent again, up to :data:`ATTEMPTS` times); anything else means another writer
changed it (the precondition would have failed). Reads are retried the same bounded number of
times. What still fails is raised as :class:`StoreUnavailableError` (an ``OSError``), one line
naming the store's host -- never a 412 in disguise.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from typing import Any

import fsspec.asyn

from marin_assets.execution.storage import filesystem

logger = logging.getLogger(__name__)

_BOUNDARY = "==marin-lease=="
ATTEMPTS = 4  # requests per operation before StoreUnavailableError (each bounded by the storage timeout)
_BACKOFF_S = (0.2, 0.5, 1.0)


class StoreUnavailableError(OSError):
    """A store request kept failing transiently (5xx, 429, connection errors, timeouts)."""


def is_transient(exc: BaseException) -> bool:
    """A failure after which the request may or may not have been applied, and may be tried again."""
    # gcsfs is imported here, on a failure, not with the engine: a run whose prefix is local never
    # needs it, and importing it costs a cached re-run ~0.2 s (bench/cached_rerun.py).
    from gcsfs.retry import is_retriable

    return isinstance(exc, (TimeoutError, ConnectionError)) or (isinstance(exc, Exception) and is_retriable(exc))


class GCSLeaseBackend:
    """:class:`~marin_assets.execution.conditional.LeaseBackend` on GCS; tokens are generations."""

    def __init__(self, path: str) -> None:
        self.fs, _ = filesystem(path)

    # ------------------------------------------------------------------ requests
    @property
    def host(self) -> str:
        """The store's endpoint as ``host:port`` (for messages)."""
        parsed = urllib.parse.urlparse(self.fs._location)
        return parsed.netloc or self.fs._location

    def _once(self, method: str, path: str, *args: str, **kwargs: Any) -> tuple[Any, bytes]:
        """One request, without gcsfs's retry loop (see the module docstring); ``(headers, body)``.

        404 raises FileNotFoundError, 412 FileExistsError, other errors as gcsfs raises them.
        """
        request = type(self.fs)._request.__wrapped__  # the undecorated coroutine: no retries
        _, headers, _, contents = fsspec.asyn.sync(self.fs.loop, request, self.fs, method, path, *args, **kwargs)
        return headers, contents

    def _unavailable(self, what: str, exc: BaseException) -> StoreUnavailableError:
        detail = str(exc) or type(exc).__name__
        return StoreUnavailableError(
            f"store {self.host} did not complete {what} after {ATTEMPTS} tries: {detail.splitlines()[0]}"
        )

    def _retrying(self, what: str, method: str, path: str, *args: str, **kwargs: Any) -> tuple[Any, bytes]:
        """An idempotent request (a read), retried on transient failures."""
        for attempt in range(ATTEMPTS):
            try:
                return self._once(method, path, *args, **kwargs)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if attempt == ATTEMPTS - 1:
                    raise self._unavailable(what, exc) from exc
                logger.info("%s on %s failed transiently (%s); trying again", what, self.host, exc)
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
        raise AssertionError("unreachable")

    def _split(self, path: str) -> tuple[str, str]:
        bucket, key, _ = self.fs.split_path(path)
        return bucket, key

    # ------------------------------------------------------------------ conditional writes
    def _upload(self, path: str, data: bytes, if_generation_match: str) -> str | None:
        bucket, key = self._split(path)
        metadata = json.dumps({"name": key})
        body = (
            (
                f"--{_BOUNDARY}\nContent-Type: application/json; charset=UTF-8\n\n{metadata}\n"
                f"--{_BOUNDARY}\nContent-Type: application/octet-stream\n\n"
            ).encode()
            + data
            + f"\n--{_BOUNDARY}--".encode()
        )
        expected = None if if_generation_match == "0" else if_generation_match  # None: absent
        for attempt in range(ATTEMPTS):
            try:
                _, contents = self._once(
                    "POST",
                    f"{self.fs._location}/upload/storage/v1/b/{bucket}/o",
                    uploadType="multipart",
                    headers={"Content-Type": f'multipart/related; boundary="{_BOUNDARY}"'},
                    data=body,
                    ifGenerationMatch=if_generation_match,
                )
            except FileExistsError:  # 412 Precondition Failed: someone else wrote it first
                if attempt == 0:
                    return None
                # A 412 after an ambiguous earlier try: that try may be what changed the object.
                return self._landed(path, data, expected, FileExistsError(path))
            except Exception as exc:
                if not is_transient(exc):
                    raise
                resolved = self._landed(path, data, expected, exc)
                if resolved != "":
                    return resolved
                if attempt == ATTEMPTS - 1:
                    raise self._unavailable(f"a conditional write of {key}", exc) from exc
                logger.info("conditional write of %s on %s failed transiently (%s); it did not land: sending it again",
                            key, self.host, exc)  # fmt: skip
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
                continue
            return str(json.loads(contents)["generation"])
        raise AssertionError("unreachable")

    def _landed(self, path: str, data: bytes, expected: str | None, exc: BaseException) -> str | None:
        """After an ambiguous answer to a conditional write of ``data`` over generation ``expected``
        (None: create): the new generation when our write landed, None when another writer changed
        the object (our precondition would fail now), "" when the object is still as we expected
        (our write did not land; it may be sent again)."""
        current = self.read(path)
        if current is not None and current[0] == data:
            logger.info("a conditional write of %s was answered %r but landed (generation %s)", path, exc, current[1])
            return current[1]
        if (current is None and expected is None) or (current is not None and current[1] == expected):
            return "" if not isinstance(exc, FileExistsError) else None
        return None

    def create_exclusive(self, path: str, data: bytes) -> str | None:
        return self._upload(path, data, "0")

    def read(self, path: str) -> tuple[bytes, str] | None:
        bucket, key = self._split(path)
        try:
            headers, content = self._retrying(f"a read of {key}", "GET", "b/{}/o/{}", bucket, key, alt="media")
        except FileNotFoundError:
            return None
        generation = headers.get("x-goog-generation") or headers.get("X-Goog-Generation")
        if generation is None:  # a server without the header: ask for the metadata
            _, info = self._retrying(f"a read of {key}", "GET", "b/{}/o/{}", bucket, key)
            generation = json.loads(info)["generation"]
        return content, str(generation)

    def replace_if(self, path: str, token: str, data: bytes) -> str | None:
        return self._upload(path, data, token)

    def delete_if(self, path: str, token: str) -> bool:
        bucket, key = self._split(path)
        # GCS enforces the precondition on DELETE; some emulators do not, so compare first too.
        current = self.read(path)
        if current is None or current[1] != token:
            return False
        for attempt in range(ATTEMPTS):
            try:
                self._once("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=token)
                return True
            except (FileExistsError, FileNotFoundError):
                if attempt == 0:
                    return False
                # After an ambiguous try: gone now means that try deleted it.
                return self.read(path) is None
            except Exception as exc:
                if not is_transient(exc):
                    raise
                current = self.read(path)
                if current is None:
                    return True  # the ambiguous try deleted it
                if current[1] != token:
                    return False
                if attempt == ATTEMPTS - 1:
                    raise self._unavailable(f"a conditional delete of {key}", exc) from exc
                time.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
        raise AssertionError("unreachable")
