"""Marin's ``marin.processing.classification.deduplication.exact``: ``dedup_exact_paragraph`` and
``dedup_exact_document`` (keyword-only, as Marin's).

Same hashing and marking as :mod:`.pipeline` (first occurrence unmarked), written to
``<output_path>/data/<same relative path>.jsonl.gz`` under the attribute ``"exact_paragraph"`` /
``"exact_document"`` (``str(DedupMode.EXACT_PARAGRAPH)``). Returns
``{"success": True, "mode": ..., "dedup/exact/<level>/total", ".../dups", ".../unique", ".../dup_clusters"}``
(Marin's counter names: ``dups`` counts every occurrence of a duplicated paragraph, ``dup_clusters``
the distinct duplicated ones).
"""

from __future__ import annotations

from typing import Any

from marin_assets.execution.storage import join_path
from marin_assets.processing.classification.deduplication.pipeline import (
    EXTENSIONS,
    DedupMode,
    base_path_of,
    collect_input_files,
    mark_files,
)

DEFAULT_FILETYPES = [ext.lstrip(".") for ext in EXTENSIONS]


def _run(input_paths: str | list[str], output_path: str, text_field: str, filetypes: list[str] | None, mode: DedupMode):
    level = "paragraph" if mode == DedupMode.EXACT_PARAGRAPH else "document"
    wanted = tuple("." + t.lstrip(".") for t in (filetypes or DEFAULT_FILETYPES))
    files = [f for f in collect_input_files(input_paths) if f.endswith(wanted)]
    if not files:
        raise FileNotFoundError(f"no {', '.join(wanted)} files in {input_paths}")
    counts = mark_files(
        files,
        base_path_of(input_paths, files),
        join_path(str(output_path), "data"),
        str(mode),
        text_field,
        level,
        new_extension=".jsonl.gz",
    )
    key = f"dedup/exact/{level}"
    return {
        "success": True,
        "mode": str(mode),
        f"{key}/total": sum(counts.values()),
        f"{key}/dups": sum(c for c in counts.values() if c > 1),
        f"{key}/unique": sum(1 for c in counts.values() if c == 1),
        f"{key}/dup_clusters": sum(1 for c in counts.values() if c > 1),
    }


def dedup_exact_paragraph(
    *, input_paths: str | list[str], output_path: str, text_field: str = "text", filetypes: list[str] | None = None
) -> dict[str, Any]:
    """Mark every repeated paragraph after its first occurrence (spans ``[start, end, 1.0]``)."""
    return _run(input_paths, output_path, text_field, filetypes, DedupMode.EXACT_PARAGRAPH)


def dedup_exact_document(
    *, input_paths: str | list[str], output_path: str, text_field: str = "text", filetypes: list[str] | None = None
) -> dict[str, Any]:
    """Mark every document whose exact text occurred earlier (``true``; others ``false``)."""
    return _run(input_paths, output_path, text_field, filetypes, DedupMode.EXACT_DOCUMENT)
