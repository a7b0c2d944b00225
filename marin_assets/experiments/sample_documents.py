"""A small, deterministic, offline document set: docstrings of the Python standard library.

Real-ish English text produced without any download: the quickstart's held-out set, and the
training text of the model tests and ``bench/train.py``. Docstrings of the standard library
(:mod:`marin_assets.experiments.docstring_corpus`) are prose, vary in length and are identical on
every machine with the same Python minor version, which keeps the step's output deterministic.

Output layout (``jsonl.gz`` files with a ``text`` field, the format every tokenize step reads)::

    <out>/train/docs-00000.jsonl.gz ...
    <out>/validation/docs-00000.jsonl.gz
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass

from marin_assets.execution.step import ExecutorStep, StepPath, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_bytes, join_path
from marin_assets.experiments.docstring_corpus import iter_docstrings, python_files, stdlib_dir

# Docstrings shorter than this are mostly "Return x." one-liners: noise for a language model.
MIN_DOC_CHARS = 200


@dataclass(frozen=True)
class SampleDocumentsConfig:
    """Config of :func:`write_sample_documents`.

    Attributes:
        output_path: where ``train/`` and ``validation/`` are written.
        max_bytes: stop after this many bytes of text (train + validation).
        validation_fraction: share of documents (chosen by a hash of the text) held out.
        docs_per_file: documents per jsonl.gz shard (several shards let the cache builder parallelise).
        source_dir: directory of ``.py`` files to read (None: this interpreter's standard library).
    """

    output_path: StepPath
    max_bytes: int = 4_000_000
    validation_fraction: float = 0.05
    docs_per_file: int = 2000
    source_dir: StepPath | None = None


def long_docstrings(source_dir: str) -> Iterator[str]:
    """Long docstrings of every module, class and function below ``source_dir``, in a fixed order."""
    files = python_files(source_dir, {"site-packages", "dist-packages", "test", "tests", "idlelib"})
    return (doc for doc in iter_docstrings(files) if len(doc) >= MIN_DOC_CHARS)


def _is_validation(text: str, fraction: float) -> bool:
    digest = hashlib.md5(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < fraction


def _gz_jsonl(docs: list[str]) -> bytes:
    buf = io.BytesIO()
    # mtime=0 makes the gzip bytes reproducible.
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        for doc in docs:
            gz.write((json.dumps({"text": doc}, ensure_ascii=False) + "\n").encode("utf-8"))
    return buf.getvalue()


def write_sample_documents(config: SampleDocumentsConfig) -> dict:
    """Write the docstring corpus under ``config.output_path``; returns counts as step metadata."""
    source_dir = config.source_dir or stdlib_dir()
    seen: set[str] = set()
    splits: dict[str, list[str]] = {"train": [], "validation": []}
    total = 0
    for doc in long_docstrings(source_dir):
        if doc in seen:
            continue
        seen.add(doc)
        splits["validation" if _is_validation(doc, config.validation_fraction) else "train"].append(doc)
        total += len(doc.encode("utf-8"))
        if total >= config.max_bytes:
            break
    counts = {}
    for split, docs in splits.items():
        # Files are rewritten whole and atomically, so a crash mid-way leaves no torn shard.
        for i in range(0, max(len(docs), 1), config.docs_per_file):
            chunk = docs[i : i + config.docs_per_file]
            atomic_write_bytes(
                join_path(config.output_path, f"{split}/docs-{i // config.docs_per_file:05d}.jsonl.gz"),
                _gz_jsonl(chunk),
            )
        counts[f"{split}_documents"] = len(docs)
        counts[f"{split}_bytes"] = sum(len(d.encode("utf-8")) for d in docs)
    return counts


def sample_documents_step(name: str = "documents/stdlib-docstrings", max_bytes: int = 4_000_000) -> ExecutorStep:
    """A step producing the docstring corpus (``<out>/train``, ``<out>/validation``)."""
    return ExecutorStep(
        name=name,
        fn=write_sample_documents,
        config=SampleDocumentsConfig(output_path=this_output_path(), max_bytes=versioned(max_bytes)),
        description="Docstrings of the Python standard library as jsonl.gz documents (offline sample corpus).",
    )
