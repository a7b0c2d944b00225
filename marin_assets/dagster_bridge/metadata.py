"""Step metadata as Dagster metadata values.

Steps return plain JSON plus the markers of :mod:`marin_assets.execution.metadata` (markdown, path,
url, table); numbers stay numbers, so the asset page's *Plots* compares them across
materializations.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from marin_assets.execution.metadata import TYPE_KEY


def uri_metadata(path: str) -> dg.MetadataValue:
    """``dagster/uri`` as text: the UI shows a text (or URL) ``dagster/uri`` in the asset page's
    Storage section and hides the entry from the metadata tables -- a path-typed one is hidden
    from both, so nobody would see where the output lives."""
    return dg.MetadataValue.text(path)


def _table(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Dagster's table of ``rows``; a column's type comes from all its non-None values (None: a gap)."""
    names = list(dict.fromkeys(k for row in rows for k in row))

    def kind(name: str) -> str:
        values = [row.get(name) for row in rows if row.get(name) is not None]
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return "int"
        return "float" if values and all(isinstance(v, (int, float)) for v in values) else "string"

    schema = dg.TableSchema(columns=[dg.TableColumn(name, kind(name)) for name in names])
    records = [dg.TableRecord({name: row.get(name) for name in names}) for row in rows]  # same fields in each
    return dg.MetadataValue.table(records, schema=schema)


def to_dagster_metadata(values: Mapping[str, Any]) -> dict[str, Any]:
    """Map step metadata (plain JSON plus ``execution.metadata`` markers) to Dagster values."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and TYPE_KEY in value:
            kind, inner = value[TYPE_KEY], value.get("value")
            if kind == "markdown":
                out[key] = dg.MetadataValue.md(str(inner))
            elif kind == "path":
                out[key] = dg.MetadataValue.path(str(inner))
            elif kind == "url":  # e.g. marin/ray_task (marin_resources.ray_jobs.ray_links)
                out[key] = dg.MetadataValue.url(str(inner))
            elif kind == "table":  # rows of plain values: Dagster's table (a plottable series)
                out[key] = _table(inner)
            else:
                out[key] = dg.MetadataValue.json(inner)
        elif isinstance(value, bool):
            out[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            out[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            out[key] = dg.MetadataValue.float(value)
        elif isinstance(value, str):
            out[key] = dg.MetadataValue.text(value)
        elif value is None:
            out[key] = dg.MetadataValue.null()
        else:
            out[key] = dg.MetadataValue.json(value)
    return out
