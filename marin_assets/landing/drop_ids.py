"""Drop ids stored compactly: ``drop-001`` ... ``drop-300`` as ``["drop-{001..300}"]``.

Sensor cursors and the drop table's state remember every processed drop; folded, they stay small
with thousands of drops.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

_NUMBERED = re.compile(r"^(.*?)(\d+)$")
_RANGE = re.compile(r"^(.*)\{(\d+)\.\.(\d+)\}$")


def compact_ids(ids: Iterable[str]) -> list[str]:
    """Ids with runs of consecutive numbers folded: ``drop-001..drop-003`` -> ``drop-{001..003}``.

    Ids that do not end in a number, or whose number has another width, stay as they are. Partition
    keys never hold ``{`` (``validate_partition_key``), so a folded entry cannot be mistaken for an id.
    """
    plain: list[str] = []
    numbered: dict[tuple[str, int], list[int]] = {}
    for key in set(ids):
        match = _NUMBERED.match(key)
        if match is None:
            plain.append(key)
        else:
            numbered.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
    out = sorted(plain)
    for (stem, width), numbers in sorted(numbered.items()):
        numbers.sort()
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1 and len(str(n)) <= width:
                prev = n
                continue
            if start == prev:
                out.append(f"{stem}{start:0{width}d}")
            else:
                out.append(f"{stem}{{{start:0{width}d}..{prev:0{width}d}}}")
            if n is not None:
                start = prev = n
    return out


def expand_ids(entries: Any) -> set[str]:
    """The ids :func:`compact_ids` folded (anything that is not a list of strings reads as none)."""
    if not isinstance(entries, list):
        return set()
    out: set[str] = set()
    for entry in entries:
        if not isinstance(entry, str):
            continue
        match = _RANGE.match(entry)
        if match is None:
            out.add(entry)
            continue
        stem, low, high = match.group(1), match.group(2), match.group(3)
        width = len(low)
        out.update(f"{stem}{n:0{width}d}" for n in range(int(low), int(high) + 1))
    return out
