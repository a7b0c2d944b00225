"""Small helpers shared by the model steps (listing document files, reading jsonl, process RSS)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import filesystem

DOCUMENT_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz")


def step_path(value: StepPath) -> str:
    """A config's ``StepPath`` field as the step function sees it: the engine resolves placeholders to
    plain strings before calling the function.

    Raises:
        TypeError: a placeholder (``output_path_of(...)``) reached a function called outside the engine.
    """
    if not isinstance(value, str):
        raise TypeError(f"unresolved step path {value!r}: run the step through the engine (executor_main, run_steps)")
    return value


def as_path_list(paths: str | Sequence[str]) -> list[str]:
    """``paths`` as a flat list (a partitioned input resolves to a list, a plain one to a string)."""
    if isinstance(paths, str):
        return [paths]
    out: list[str] = []
    for p in paths:
        out.extend(as_path_list(p))
    return out


def list_document_files(paths: str | Sequence[str]) -> list[str]:
    """Every jsonl(.gz) file at or below ``paths`` (files are kept as is), sorted, as URLs/paths.

    Hidden files (the engine's ``.executor_*`` and temporary files) are skipped.
    """
    found: list[str] = []
    for path in as_path_list(paths):
        fs, p = filesystem(path)
        protocol = path.split("://", 1)[0] + "://" if "://" in path else ""
        if fs.isfile(p):
            found.append(path)
            continue
        for f in sorted(fs.find(p)):
            base = f.rsplit("/", 1)[-1]
            if base.startswith(".") or not base.endswith(DOCUMENT_SUFFIXES):
                continue
            found.append(protocol + f if protocol and not f.startswith(protocol) else f)
    return sorted(set(found))


def iter_texts(files: Sequence[str], field: str = "text") -> Iterator[str]:
    """Yield the ``field`` of every record of JSON-lines ``files`` (plain / gzip / zstd, sniffed)."""
    from marin_assets.core.io import read_jsonl

    for path in files:
        for record in read_jsonl(path):
            yield record[field]
