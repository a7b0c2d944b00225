"""Marin's ``marin.processing.classification.deduplication.pipeline``: exact deduplication by hash.

``deduplicate(DedupeConfig(input_path, output_path, attribute_name, processes, mode, text_field))``
reads every ``.jsonl`` / ``.jsonl.gz`` / ``.jsonl.zst`` / ``.parquet`` file below ``input_path`` (a
folder, a file, or a list of them) and writes, for each, an attribute file at the same relative path
below ``<output_path>/data/`` (Marin's layout; ``consolidate`` reads it by that path), one record per
document::

    {"id": ..., "attributes": {<attribute_name>: ...}}

* ``DedupMode.DEDUPLICATE`` (default; Marin's later name ``EXACT_PARAGRAPH``): a paragraph is a line
  of the text; every occurrence of a paragraph after its first (in file order, then record order) is a
  span ``[start, end, 1.0]`` (character offsets in the text). Empty lines are never marked.
* ``DedupMode.EXACT_DOC_DEDUPLICATE`` (later ``EXACT_DOCUMENT``): ``true`` for a document whose exact
  text occurred earlier, ``false`` otherwise -- of three equal documents, two are marked.

A document's id is its ``id`` field, else the sha256 of its text (Marin's resolved id). The result
is Marin's: ``{"success", "mode", "level", "total", "unique", "unique_dups"}`` -- paragraphs (or
documents) seen, those occurring once, and the distinct ones occurring more than once. The hashes are
128-bit blake2b digests held in memory (16 bytes per distinct paragraph); ``processes`` is accepted
(Marin's Zephyr parallelism) and the files are read one after another.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from marin_assets.core.io import iter_records, write_jsonl_shard
from marin_assets.execution.step import THIS_OUTPUT_PATH, StepPath
from marin_assets.execution.storage import filesystem, is_local, join_path
from marin_assets.utils import fsspec_glob, rebase_file_path

logger = logging.getLogger(__name__)

EXTENSIONS = (".jsonl.zst", ".jsonl.gz", ".jsonl", ".parquet")


class DedupMode(StrEnum):
    """Marin's modes (string values as Marin's ``auto()`` gives them)."""

    DEDUPLICATE = "deduplicate"
    EXACT_DOC_DEDUPLICATE = "exact_doc_deduplicate"
    EXACT_PARAGRAPH = "exact_paragraph"
    EXACT_DOCUMENT = "exact_document"


PARAGRAPH_MODES = (DedupMode.DEDUPLICATE, DedupMode.EXACT_PARAGRAPH)
DOCUMENT_MODES = (DedupMode.EXACT_DOC_DEDUPLICATE, DedupMode.EXACT_DOCUMENT)


@dataclass(frozen=True)
class DedupeConfig:
    """Marin's config of exact deduplication (same fields and defaults).

    Attributes:
        input_path: a folder, a file, or a list of them.
        output_path: attribute files go to ``<output_path>/data/<same relative path>``.
        attribute_name: key of the result in each record's ``attributes``.
        processes: Marin's parallelism (accepted; see the module docstring).
        mode: :class:`DedupMode`.
        text_field: the field holding the text.
    """

    input_path: StepPath | list[StepPath]
    output_path: StepPath = THIS_OUTPUT_PATH
    attribute_name: str = "duplicate_text"
    processes: int = 1
    mode: DedupMode = DedupMode.DEDUPLICATE
    text_field: str = "text"


def extension_of(path: str) -> str:
    for ext in EXTENSIONS:
        if path.endswith(ext):
            return ext
    raise ValueError(f"{path}: not one of the supported extensions {EXTENSIONS}")


def absolute_inputs(input_path: str | list[str]) -> str | list[str]:
    """Local input paths made absolute (the listings name files absolutely); URLs as they are."""
    if isinstance(input_path, list):
        return [str(absolute_inputs(p)) for p in input_path]
    path = str(input_path)
    return os.path.abspath(path) if is_local(path) else path


def collect_input_files(input_path: str | list[str]) -> list[str]:
    """The input files below each path (sorted), or the path itself when it is a file."""
    input_path = absolute_inputs(input_path)
    paths = input_path if isinstance(input_path, list) else [input_path]
    files: list[str] = []
    for path in paths:
        found = [
            f for ext in EXTENSIONS for f in fsspec_glob(f"{str(path).rstrip('/')}/**/*{ext}") if extension_of(f) == ext
        ]
        if found:
            files.extend(sorted(set(found)))
        elif str(path).endswith(EXTENSIONS) and filesystem(str(path))[0].exists(str(path)):
            files.append(str(path))
        else:
            raise FileNotFoundError(f"no {'/'.join(EXTENSIONS)} files in {path}")
    return files


def base_path_of(input_path: str | list[str], files: list[str]) -> str:
    input_path = absolute_inputs(input_path)
    base = input_path[0] if isinstance(input_path, list) else input_path
    return base.rsplit("/", 1)[0] if base in files else base


def read_documents(path: str) -> Iterator[dict[str, Any]]:
    """The records of one input file (JSON lines of any compression, or Parquet)."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        fs, p = filesystem(path)
        with fs.open(p, "rb") as handle:
            for batch in pq.ParquetFile(handle).iter_batches():
                yield from batch.to_pylist()
        return
    for line_number, record in iter_records(path):
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{line_number}: a record must be a JSON object, got {type(record).__name__}")
        yield record


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def document_id(record: dict[str, Any], text: str) -> Any:
    doc_id = record.get("id")
    return doc_id if doc_id is not None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text(record: dict[str, Any], field: str, where: str) -> str:
    text = record.get(field)
    if not isinstance(text, str):
        raise ValueError(f"{where}: field {field!r} is {type(text).__name__}, not text")
    return text


def paragraphs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, paragraph)`` of every non-empty line of ``text``."""
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        if line.strip():
            yield start, end, line
        start = end + 1


def _count(files: list[str], field: str, level: str) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for path in files:
        for number, record in enumerate(read_documents(path), 1):
            text = _text(record, field, f"{path}: record {number}")
            keys = [_digest(p) for _, _, p in paragraphs(text)] if level == "paragraph" else [_digest(text)]
            for key in keys:
                counts[key] = counts.get(key, 0) + 1
    return counts


def _stats(counts: dict[bytes, int]) -> dict[str, int]:
    return {
        "total": sum(counts.values()),
        "unique": sum(1 for c in counts.values() if c == 1),
        "unique_dups": sum(1 for c in counts.values() if c > 1),
    }


def mark_files(
    files: list[str],
    base: str,
    output_dir: str,
    attribute_name: str,
    field: str,
    level: str,
    new_extension: str | None = None,
) -> dict[bytes, int]:
    """Two passes: count every hash, then write each file's attributes (first occurrence unmarked);
    returns the count of every hash."""
    counts = _count(files, field, level)
    seen: set[bytes] = set()
    for path in files:
        out: list[dict[str, Any]] = []
        for record in read_documents(path):
            text = record[field]
            if level == "paragraph":
                spans = []
                for start, end, paragraph in paragraphs(text):
                    key = _digest(paragraph)
                    if counts[key] > 1 and key in seen:
                        spans.append([start, end, 1.0])
                    seen.add(key)
                value: Any = spans
            else:
                key = _digest(text)
                value = counts[key] > 1 and key in seen
                seen.add(key)
            out.append({"id": document_id(record, text), "attributes": {attribute_name: value}})
        ext = extension_of(path)
        target = rebase_file_path(base, path, output_dir, new_extension=new_extension or ext, old_extension=ext)
        if target.endswith(".parquet"):
            target = target[: -len(".parquet")] + ".jsonl.gz"
        write_jsonl_shard(target, out)
    return counts


def deduplicate(config: DedupeConfig) -> dict[str, Any]:
    """Marin's entry point: the workflow of ``config.mode`` (see the module docstring)."""
    mode = DedupMode(config.mode)
    if mode in PARAGRAPH_MODES:
        level, name = "paragraph", "deduplication"
    elif mode in DOCUMENT_MODES:
        level, name = "document", "exact_doc_deduplication"
    else:  # pragma: no cover - DedupMode has no other member
        raise ValueError(f"Unknown mode {config.mode}")
    files = collect_input_files(config.input_path)
    counts = mark_files(
        files,
        base_path_of(config.input_path, files),
        join_path(str(config.output_path), "data"),
        config.attribute_name,
        config.text_field,
        level,
    )
    stats = _stats(counts)
    logger.info(
        "%s: %d %ss, %d unique, %d duplicated", name, stats["total"], level, stats["unique"], stats["unique_dups"]
    )
    return {"success": True, "mode": name, "level": level, **stats}
