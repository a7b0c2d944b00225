"""Typed values a step function may return as metadata (no Dagster import).

A step function may return a dict of JSON-serialisable values; the executor stores it in
``<output>/.executor_metadata.json`` and the Dagster bridge attaches it to the materialization.
Plain ints, floats, strings, bools, lists and dicts map to Dagster's own types; the helpers below
mark values that need a richer rendering.
"""

from __future__ import annotations

from typing import Any

TYPE_KEY = "__marin_metadata_type__"


def markdown(text: str) -> dict[str, Any]:
    """A markdown value (tables, sample records, an embedded PNG as a data URI)."""
    return {TYPE_KEY: "markdown", "value": text}


def table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A table of rows (dicts of numbers/strings/None with the same keys), shown as Dagster's table."""
    return {TYPE_KEY: "table", "value": [dict(row) for row in rows]}


def table_markdown(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A markdown table from a list of dicts with the same keys."""
    if not rows:
        return markdown("_(empty)_")
    headers = list(rows[0].keys())
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = [str(row.get(h, "")).replace("|", "\\|").replace("\n", " ") for h in headers]
        lines.append("| " + " | ".join(cells) + " |")
    return markdown("\n".join(lines))
