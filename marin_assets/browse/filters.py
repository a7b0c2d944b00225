"""Record filters typed into the browser: ``quality < 0.5``, ``duplicate = true and chars > 200``.

A filter is conditions joined by ``and``; each is ``<field> <op> <value>`` with ``op`` one of
``< <= > >= = == !=`` or ``~`` (contains, case-insensitive). Fields are looked up in a flat row
(the record's top-level fields, its ``metadata``, its joined attributes, and the browser's own
``removed`` / ``reason`` / ``chars``). A field name may be abbreviated to one ``_``-separated word
of the real name: ``hq`` finds ``quality.hq`` (a classifier's label probabilities are one field per
label), ``duplicate`` finds ``fuzzy_duplicate`` (a name ending in the word wins, then the shortest).

``true`` / ``false`` compare truthiness (``fuzzy_duplicate = true`` matches 1), numbers
compare as numbers, anything else as text. A row without the field never matches (except ``!=``).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|==|!=|<|>|=|~)\s*(.*?)\s*$")
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class FilterError(ValueError):
    """A filter the browser cannot parse (shown to the user, HTTP 400)."""


@dataclass(frozen=True)
class Condition:
    """One ``field op value`` comparison."""

    field: str
    op: str
    value: Any

    def matches(self, row: Mapping[str, Any]) -> bool:
        key = resolve_field(self.field, row)
        if key is None:
            return self.op == "!="
        actual = row[key]
        if isinstance(self.value, bool):
            equal = _truthy(actual) == self.value
            if self.op in ("=", "=="):
                return equal
            if self.op == "!=":
                return not equal
            raise FilterError(f"{self.field} {self.op} {self.value}: true/false only compare with = or !=")
        if self.op == "~":
            return str(self.value).lower() in str(actual).lower()
        target: Any = self.value
        if isinstance(target, float) and isinstance(actual, int | float) and not isinstance(actual, bool):
            left: Any = float(actual)
        elif isinstance(target, float) and isinstance(actual, bool):
            left = float(actual)
        else:
            left, target = (
                str(actual),
                str(self.value if not isinstance(self.value, float) else _number_text(self.value)),
            )
        if self.op in ("=", "=="):
            return left == target
        if self.op == "!=":
            return left != target
        try:
            return _ORDER[self.op](left, target)
        except TypeError:
            return False


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "none", "null")
    return bool(value)


def _parse_value(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lower = text.lower()
    if lower in ("true", "false"):
        return lower == "true"
    try:
        return float(text)
    except ValueError:
        return text


def parse_filter(text: str | None) -> list[Condition]:
    """The conditions of a filter string (empty: no filter); raises :class:`FilterError`."""
    if not text or not text.strip():
        return []
    conditions = []
    for part in _AND.split(text.strip()):
        match = _CONDITION.match(part)
        if not match or match.group(3) == "":
            raise FilterError(f"cannot read {part!r}: want <field> <op> <value>, op one of < <= > >= = != ~")
        conditions.append(Condition(match.group(1), match.group(2), _parse_value(match.group(3))))
    return conditions


def resolve_field(name: str, row: Mapping[str, Any]) -> str | None:
    """The key of ``row`` that ``name`` stands for (exact, else a ``_``-word of a key)."""
    if name in row:
        return name
    ending = [k for k in row if k.split("_")[-1] == name or k.split(".")[-1] == name]
    if ending:
        return min(ending, key=len)
    word = [k for k in row if name in re.split(r"[_.]", k)]
    return min(word, key=len) if word else None


def fields_used(conditions: list[Condition]) -> set[str]:
    """Field names the conditions mention (to compute costly fields only when asked)."""
    return {c.field for c in conditions}


def matches_all(conditions: list[Condition], row: Mapping[str, Any]) -> bool:
    """True when ``row`` satisfies every condition."""
    return all(c.matches(row) for c in conditions)
