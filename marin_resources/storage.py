"""Storage root of Marin outputs: a prefix URL and its fsspec filesystem.

No Dagster import here: the step engine uses this directly; ``MarinStorageResource`` wraps it.

The prefix is where every step writes ``<prefix>/<name>-<hash>``: a local folder by default
(``$MARIN_PREFIX``, else ``./data`` made absolute) or any fsspec URL (``gs://bucket/marin`` through
gcsfs, ``s3://``, ``memory://`` in tests). Nothing here is specific to one backend.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

DEFAULT_LOCAL_PREFIX = "./data"
STORAGE_TIMEOUT_ENV = "MARIN_STORAGE_TIMEOUT_S"
DEFAULT_STORAGE_TIMEOUT_S = 30.0


def storage_timeout_s() -> float:
    """Seconds an object-store request may wait for its connection or for its next byte
    (``$MARIN_STORAGE_TIMEOUT_S``, default 30): the bound on "the store stopped answering".

    A silence, not a total: a large upload or download that keeps moving is never cut off.
    (aiohttp's own default waits 5 minutes for a silent store, and gcsfs retries that 6 times.)

    Raises:
        ValueError: the variable is set to something other than a positive number.
    """
    raw = os.environ.get(STORAGE_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_STORAGE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise ValueError(f"${STORAGE_TIMEOUT_ENV}={raw!r} is not a positive number of seconds")
    return value


def request_timeout(seconds: float) -> Any:
    """The gcsfs ``requests_timeout`` for a silence of ``seconds``: connect and per-read, no total."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=seconds, sock_read=seconds)


def _protocol_of(url: str) -> str:
    """``gs`` for ``gs://b/x``, ``file`` for plain paths and ``file://`` URLs."""
    if "://" in url:
        return url.split("://", 1)[0].lower()
    return "file"


def normalize_prefix(prefix: str | os.PathLike[str] | None) -> str:
    """Resolve and validate a prefix.

    None -> ``$MARIN_PREFIX`` -> ``./data``. Local paths (and ``file://`` URLs) become absolute
    paths without a trailing slash, so that the same folder is always spelled the same way (it
    appears in output paths and versions). Remote URLs keep their scheme and lose trailing slashes.

    Raises:
        ValueError: empty prefix, unknown fsspec protocol, or a bucket URL without a bucket.
    """
    raw = os.fspath(prefix) if prefix is not None else (os.environ.get("MARIN_PREFIX") or DEFAULT_LOCAL_PREFIX)
    raw = raw.strip()
    if not raw:
        raise ValueError("storage prefix is empty; set MARIN_PREFIX or pass a path/URL")
    protocol = _protocol_of(raw)
    if protocol in {"file", "local"}:
        path = raw.split("://", 1)[1] if "://" in raw else raw
        return os.path.abspath(os.path.expanduser(path))
    import fsspec

    if protocol not in fsspec.available_protocols():
        raise ValueError(f"unknown storage protocol {protocol!r} in prefix {raw!r}")
    rest = raw.split("://", 1)[1].rstrip("/")
    if not rest and protocol not in {"memory"}:
        raise ValueError(f"prefix {raw!r} names no bucket/root")
    return f"{protocol}://{rest}"


def default_prefix() -> str:
    """The prefix when none is given: ``$MARIN_PREFIX``, else ``./data``, normalised as
    :func:`normalize_prefix` does (the one place this default is written; ``executor_main``, the
    maintenance commands, the browser and the code location all use it)."""
    return normalize_prefix(None)


@dataclass(frozen=True)
class StorageConfig:
    """Where outputs live.

    Attributes:
        prefix: local folder or fsspec URL; None means ``$MARIN_PREFIX``, else ``./data``.
        storage_options: passed to the fsspec filesystem (e.g. ``{"project": ...}`` for gcsfs).
            Credentials come from the environment (workload identity / ADC), never from here.
    """

    prefix: str | None = None
    storage_options: dict[str, Any] | None = None

    @property
    def root(self) -> str:
        """The validated, normalised prefix (absolute path or ``proto://...`` URL)."""
        return normalize_prefix(self.prefix)

    @property
    def protocol(self) -> str:
        """fsspec protocol of the root (``file`` for local folders)."""
        return _protocol_of(self.root)

    @property
    def is_local(self) -> bool:
        """True when the root is a folder of this machine."""
        return self.protocol == "file"

    def filesystem(self) -> Any:
        """The fsspec filesystem of the root (``LocalFileSystem``, ``GCSFileSystem``, ...).

        Object stores come without a directory-listing cache: fsspec keeps one instance per thread
        and a cached listing would hide objects other processes wrote since (a new drop).
        """
        import fsspec

        options = dict(self.storage_options or {})
        if not self.is_local:
            options.setdefault("use_listings_cache", False)
        if self.protocol in ("gs", "gcs"):
            options.setdefault("requests_timeout", request_timeout(storage_timeout_s()))
        return fsspec.filesystem(self.protocol, **options)

    def url(self, *parts: str) -> str:
        """``<root>/<part>/<part>`` (parts may themselves contain slashes)."""
        pieces = [p.strip("/") for p in parts if p and p.strip("/")]
        return "/".join([self.root.rstrip("/"), *pieces]) if pieces else self.root

    def relative(self, url: str) -> str | None:
        """``url`` relative to the root, or None when it is not under the root."""
        root = self.root.rstrip("/")
        candidate = normalize_prefix(url) if _protocol_of(url) in {"file", "local"} else url.rstrip("/")
        if candidate == root:
            return ""
        if candidate.startswith(root + "/"):
            return candidate[len(root) + 1 :]
        return None

    def ensure_root(self) -> str:
        """Create the root if the backend has folders (object stores do not need it); return it."""
        fs = self.filesystem()
        if self.is_local:
            os.makedirs(self.root, exist_ok=True)
        else:
            # Object stores have no folders; makedirs is a no-op or creates the bucket marker.
            with contextlib.suppress(NotImplementedError, PermissionError):
                fs.makedirs(self.root, exist_ok=True)
        return self.root

    def exists(self, *parts: str) -> bool:
        """Whether ``<root>/<parts>`` exists."""
        return bool(self.filesystem().exists(self.url(*parts)))

    def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        """Open ``path`` (absolute URL, or relative to the root) through fsspec."""
        full = path if ("://" in path or os.path.isabs(path)) else self.url(path)
        if "w" in mode and self.is_local:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        return self.filesystem().open(full, mode, **kwargs)

    def describe(self) -> dict[str, Any]:
        """Small dict for logs and Dagster metadata (no storage options: they may hold settings
        that should not be shown)."""
        return {"prefix": self.root, "protocol": self.protocol, "local": self.is_local}
