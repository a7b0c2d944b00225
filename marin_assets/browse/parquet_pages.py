"""Parquet for the browser, with memory bounded per request whatever the file's layout.

Before reading, the browser asks :mod:`marin_assets.core.parquet_layout` what the file says of
itself: a footer over 1/8 of the limit (parsed, a footer of many row groups takes several times its
size) is not opened (shown as such); a column of a row group with a data page over the limit -- one
huge page, or one huge cell -- is left out of that row group, and its cells read ``[not shown: ...]``,
saying why.

The limit is the browser's ``--max_read_mib`` (:data:`MAX_READ_BYTES` by default): the most bytes
one request decodes at once. A page shown is never bigger than the limit; what is left out is said
on the page (:attr:`Page.notes <marin_assets.browse.shards.Page>`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MAX_READ_BYTES = 32 << 20
"""Default of the most bytes a request decodes at once (a parquet page or footer)."""
SETTING = "--max_read_mib"
FOOTER_SHARE = 8
"""A footer may take 1/8 of the read limit: parsed, its row groups' metadata takes several times its bytes."""


class LayoutCache:
    """What was found of a row group's columns: ``(path, fingerprint, group, limit) -> {field: why}``."""

    def __init__(self, max_entries: int = 256) -> None:
        self._items: OrderedDict[tuple[str, str, int, int], dict[str, str]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def get(self, key: tuple[str, str, int, int]) -> dict[str, str] | None:
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple[str, str, int, int], value: dict[str, str]) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)


def not_shown(field: str, group: int, why: str, limit: int) -> str:
    """The text that stands in a cell left out."""
    return (
        f"[not shown: column {field!r} of row group {group} is {why}, over the browser's limit of "
        f"{limit / 2**20:.0f} MiB per read ({SETTING})]"
    )
