"""The browser's one door to storage: paths relative to the prefix, nothing outside it.

Every path the browser serves comes from a URL, so it is untrusted. :meth:`PrefixRoot.resolve`
accepts only relative paths made of plain components (no ``..``, no backslash or control
character; an absolute path or URL only when it lies below the prefix) and, on a local prefix, refuses a path whose real location
(symlinks followed) leaves the prefix. On an object store a relative path can only name objects
below the prefix, so other buckets are out of reach by construction.

Paths read from storage (experiment records, ``.executor_info`` configs, the outputs they name) are
as untrusted as URLs: the catalog passes each through :meth:`PrefixRoot.confine` before opening it,
so a planted record cannot make the browser read or show a file outside the prefix.

Listings and existence checks go through :func:`fresh_filesystem`: fsspec keeps one gcsfs instance
per thread and it caches directory listings, so a page served from a reused thread would otherwise
show an old listing (a new shard missing, a deleted one still there).
"""

from __future__ import annotations

import os
import re
from typing import Any

from marin_assets.execution.storage import filesystem, is_local, join_path

_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


def fresh_filesystem(url: str) -> tuple[Any, str]:
    """``filesystem(url)`` with fsspec's cached listings of ``url`` and its parents dropped, so the
    next ``ls`` / ``exists`` / ``info`` asks the store (a no-op on local disks)."""
    fs, path = filesystem(url)
    fs.invalidate_cache(path)
    return fs, path


class Forbidden(Exception):
    """A path outside the prefix, or not a plain relative path (HTTP 403)."""


class PrefixRoot:
    """The prefix being browsed (a local folder or a URL such as ``gs://bucket/marin``)."""

    def __init__(self, prefix: str) -> None:
        self.local = "://" not in prefix or is_local(prefix)
        if self.local:
            prefix = os.path.abspath(prefix.removeprefix("file://"))
            self.prefix = os.path.realpath(prefix)
            self.given = prefix  # experiment records name outputs below the prefix as it was spelled
        else:
            self.prefix = self.given = prefix.rstrip("/")

    def to_relative(self, path: str) -> str:
        """``path`` from a URL as a path relative to the prefix (no leading or trailing ``/``).

        A full path or URL (``/data/marin/x``, ``gs://bucket/marin/x``, as experiment records
        write them) is accepted only when it lies below the prefix; any other absolute path or URL
        raises :class:`Forbidden`.
        """
        path = path or ""
        if path.startswith("/") or "://" in path:
            inside = self.relative(path) if not _BAD_CHARS.search(path) else None
            if inside is None:
                raise Forbidden(f"{path!r} is outside the prefix {self.given}")
            path = inside
        return path.strip("/")

    def resolve(self, relative: str) -> str:
        """The full path (or URL) of ``relative`` (see :meth:`to_relative`); raises
        :class:`Forbidden` when it escapes."""
        relative = self.to_relative(relative)
        if not relative:
            return self.prefix
        if _BAD_CHARS.search(relative) or "://" in relative or relative.startswith("~"):
            raise Forbidden(f"not a plain relative path: {relative!r}")
        parts = relative.split("/")
        if any(part in ("..", ".") for part in parts):
            raise Forbidden(f"'..' and '.' are not allowed: {relative!r}")
        full = join_path(self.prefix, "/".join(p for p in parts if p))
        if self.local:
            real = os.path.realpath(full)
            if real != self.prefix and not real.startswith(self.prefix + os.sep):
                raise Forbidden(f"{relative!r} leads outside the prefix")
        return full

    def relative(self, full: str) -> str | None:
        """``full`` relative to the prefix, or None when it lies outside."""
        if self.local:
            full = os.path.abspath(full.removeprefix("file://"))
        candidates = (self.prefix, self.given)
        for base in candidates:
            if full == base:
                return ""
            if full.startswith(base + "/"):
                return full[len(base) + 1 :]
        return None

    def confine(self, full: str) -> str | None:
        """``full`` (a path read from a record or config) when it lies below the prefix -- with no
        ``..`` and, on a local prefix, no symlink leading out -- else None: never open it then."""
        if not isinstance(full, str) or not full:
            return None
        relative = self.relative(full)
        if relative is None:
            return None
        try:
            return self.resolve(relative)
        except Forbidden:
            return None
