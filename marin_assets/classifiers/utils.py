"""Marin's ``marin.classifiers.utils``: labelled datasets for classifier training.

``DatasetConfig(input_doc_path, label, sampling_rate, max_sample_size)`` names one folder of
documents and the label all of them get, as in Marin. :func:`labelled_documents` reads every
``**/*.jsonl.gz`` document below each folder (our stages' ``quarantine/`` and ``index/`` skipped),
samples it and yields ``(id, label, text)``.

``CreateDatasetConfig`` / :func:`create_dataset` (a step function, as in Marin) turn documents and
their co-sharded attributes into training examples: ``label_func(document, attributes)`` labels
each one, ``columns_to_keep`` picks its fields, and the examples land in Marin's place,
``<output_dataset_path>/data/<input path without scheme>/data.<filetype>`` (or co-sharded files
there with ``merge_dataset_shards=False``).

Sampling is deterministic per document, not per run: a document is kept when the hash of
``(seed, id)`` falls below ``sampling_rate`` (Marin draws from a seeded RNG per file), and
``max_sample_size`` keeps the documents with the lowest such hashes -- so the same inputs and seed
always give the same training set, whatever the file order.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from marin_assets.core.io import iter_records, read_jsonl_gz, write_jsonl_shard
from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.utils import rebase_file_path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetConfig:
    """One labelled source of a classifier's training data (Marin's fields).

    Attributes:
        input_doc_path: folder of Dolma-format ``.jsonl.gz`` documents (any depth).
        label: the label of every document there (``"hq"``; fastText sees ``__label__hq``).
        sampling_rate: share of the documents used.
        max_sample_size: at most this many documents (None: no cap).
    """

    input_doc_path: StepPath
    label: str
    sampling_rate: float = 1.0
    max_sample_size: int | None = None


def sample_key(seed: int, doc_id: str) -> float:
    """A number in [0, 1) fixed by ``(seed, doc_id)``: the document's place in every sample."""
    digest = hashlib.blake2b(f"{seed}\0{doc_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64


def labelled_documents(dataset: DatasetConfig, seed: int = 0) -> Iterator[tuple[str, str, str]]:
    """``(id, label, text)`` of the sampled documents of ``dataset``, in file order.

    Raises:
        FileNotFoundError: no ``.jsonl.gz`` documents below ``input_doc_path``.
        ValueError: a ``sampling_rate`` outside (0, 1].
    """
    if not 0 < dataset.sampling_rate <= 1:
        raise ValueError(f"sampling_rate of {dataset.input_doc_path} must be in (0, 1], got {dataset.sampling_rate}")
    shards = find_shards(dataset.input_doc_path)
    if not shards:
        raise FileNotFoundError(f"no .jsonl.gz documents below {dataset.input_doc_path} (label {dataset.label!r})")
    kept: list[tuple[float, str, str]] = []
    for shard in shards:
        for rec in read_jsonl_gz(shard):
            text = rec.get("text")
            if not isinstance(text, str) or not text.strip():
                continue
            doc_id = str(rec.get("id"))
            key = sample_key(seed, doc_id)
            if key < dataset.sampling_rate:
                kept.append((key, doc_id, text))
    if dataset.max_sample_size is not None and len(kept) > dataset.max_sample_size:
        cut = sorted(k for k, _, _ in kept)[dataset.max_sample_size - 1]
        kept = [d for d in kept if d[0] <= cut][: dataset.max_sample_size]
    for _, doc_id, text in kept:
        yield doc_id, dataset.label, text


@dataclass(frozen=True)
class CreateDatasetConfig:
    """Documents (and co-sharded attributes) to classifier training examples (Marin's fields).

    Attributes:
        input_doc_path: folder of Dolma-format documents (``**/*.<filetype>``).
        output_dataset_path: where the examples go (a step's ``this_output_path()``).
        label_func: ``label_func(document, [attribute record per input_attr_path]) -> label``;
            None writes examples without a label.
        input_attr_paths: attribute folders co-sharded with ``input_doc_path`` (same relative paths,
            one record per document, same order).
        seed: the sample's seed.
        sampling_rate: share of the documents used, in (0, 1].
        max_sample_size: at most this many examples (None: no cap).
        filetype: the documents' suffix, also the output's (``jsonl.gz``, ``jsonl.zst``, ``jsonl``).
        merge_dataset_shards: one ``data.<filetype>`` (True) or one file per document shard.
        columns_to_keep: document fields copied into each example.
    """

    input_doc_path: StepPath
    output_dataset_path: StepPath
    label_func: Callable[[dict[str, Any], list[dict[str, Any]]], str] | None = None
    input_attr_paths: list[StepPath] | None = None
    seed: int = 0
    sampling_rate: float = 1.0
    max_sample_size: int | None = None
    filetype: str = "jsonl.gz"
    merge_dataset_shards: bool = True
    columns_to_keep: list[str] = field(default_factory=lambda: ["text"])


def _examples_of_shard(
    config: CreateDatasetConfig, shard: str, keep: Callable[[float], bool]
) -> Iterator[dict[str, Any]]:
    """The sampled examples of one document shard, its attribute shards read in lockstep."""
    attr_files = [rebase_file_path(config.input_doc_path, shard, path) for path in config.input_attr_paths or []]
    readers = [iter_records(path) for path in attr_files]
    for line_number, doc in iter_records(shard):
        attrs = []
        for path, reader in zip(attr_files, readers, strict=True):
            attr_line, attr = next(reader, (None, None))
            if attr is None:
                raise ValueError(f"{path}: ends before document {doc.get('id')!r} ({shard}:{line_number})")
            if attr.get("id") != doc.get("id"):
                raise ValueError(
                    f"{path}:{attr_line}: attribute record of id {attr.get('id')!r} where {shard}:{line_number} "
                    f"has document {doc.get('id')!r} (attributes must be co-sharded with the documents)"
                )
            attrs.append(attr)
        if "text" not in doc:
            logger.warning("%s:%s: document %r has no text field; skipped", shard, line_number, doc.get("id"))
            continue
        if not keep(sample_key(config.seed, str(doc.get("id")))):
            continue
        missing = [c for c in config.columns_to_keep if c not in doc]
        if missing:
            raise ValueError(f"{shard}:{line_number}: document {doc.get('id')!r} has no field {missing[0]!r}")
        example = {c: doc[c] for c in config.columns_to_keep}
        if config.label_func is not None:
            example["label"] = config.label_func(doc, attrs)
        yield example
    for path, reader in zip(attr_files, readers, strict=True):
        extra = next(reader, None)
        if extra is not None:
            raise ValueError(f"{path}:{extra[0]}: more attribute records than documents in {shard}")


def create_dataset(config: CreateDatasetConfig) -> dict[str, Any]:
    """Write the labelled examples of ``config`` (see the module docstring); return counts.

    Sampling is per document, as in :func:`labelled_documents` (a document is kept when the hash of
    ``(seed, id)`` falls below ``sampling_rate``; ``max_sample_size`` keeps the lowest hashes), so a
    dataset does not depend on file order. Every file is written atomically.

    Raises:
        FileNotFoundError: no ``*.<filetype>`` documents below ``input_doc_path``.
        ValueError: a ``sampling_rate`` outside (0, 1], attributes not co-sharded with the documents
            (file and line named), or a document without a field of ``columns_to_keep``.
    """
    if not 0 < config.sampling_rate <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {config.sampling_rate}")
    suffix = "." + config.filetype.lstrip(".")
    shards = find_shards(config.input_doc_path, suffix=suffix)
    if not shards:
        raise FileNotFoundError(f"no *{suffix} documents below {config.input_doc_path}")
    cut = 1.0  # keep sample keys below the rate, and at most max_sample_size of them
    if config.max_sample_size is not None:
        keys = sorted(
            k
            for shard in shards
            for _, doc in iter_records(shard)
            if "text" in doc and (k := sample_key(config.seed, str(doc.get("id")))) < config.sampling_rate
        )
        if len(keys) > config.max_sample_size:
            cut = keys[config.max_sample_size - 1] if config.max_sample_size > 0 else -1.0
    rate = config.sampling_rate

    def keep(key: float) -> bool:
        return key < rate and key <= cut

    _, doc_fs_path = filesystem(config.input_doc_path)
    data_dir = join_path(config.output_dataset_path, "data/" + doc_fs_path.strip("/"))
    counts = {"shards": len(shards), "examples": 0}

    def counted(examples: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for example in examples:
            counts["examples"] += 1
            yield example

    if config.merge_dataset_shards:
        every = (e for shard in shards for e in _examples_of_shard(config, shard, keep))
        write_jsonl_shard(join_path(data_dir, f"data{suffix}"), counted(every))
    else:
        for shard in shards:
            out = rebase_file_path(config.input_doc_path, shard, data_dir)
            write_jsonl_shard(out, counted(_examples_of_shard(config, shard, keep)))
    counts["dataset_path"] = data_dir
    return counts
