"""Sensor cursors: one parser for every sensor of the location (JSON objects, never trusted).

A cursor is whatever the last tick stored -- possibly written by an older version of the code, or
hand-edited in the UI -- so reading one never raises: anything that is not a JSON object reads as
an empty state, and a field of the wrong type reads as empty too.

Long lists of drop ids are stored compactly (:func:`~marin_assets.landing.drop_ids.compact_ids`):
``drop-001`` ... ``drop-300`` becomes ``["drop-{001..300}"]``, so a cursor that remembers every
processed drop stays small.
"""

from __future__ import annotations

import json
from typing import Any


def load_cursor(raw: str | None) -> dict[str, Any]:
    """The cursor ``raw`` as a dict: ``{}`` when it is empty, not JSON, or not a JSON object."""
    try:
        data = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def dump_cursor(state: dict[str, Any]) -> str:
    """The cursor text of ``state`` (sorted keys: an unchanged state gives the same text)."""
    return json.dumps(state, sort_keys=True)


def mapping(state: dict[str, Any], key: str) -> dict[str, Any]:
    """``state[key]`` when it is a dict (a copy), else ``{}``."""
    value = state.get(key)
    return dict(value) if isinstance(value, dict) else {}
