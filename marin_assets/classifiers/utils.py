"""Marin's ``marin.classifiers.utils``: labelled datasets for classifier training.

``DatasetConfig(input_doc_path, label, sampling_rate, max_sample_size)`` names one folder of
documents and the label all of them get, as in Marin. :func:`labelled_documents` reads every
``**/*.jsonl.gz`` document below each folder (our stages' ``quarantine/`` and ``index/`` skipped),
samples it and yields ``(id, label, text)``.

Sampling is deterministic per document, not per run: a document is kept when the hash of
``(seed, id)`` falls below ``sampling_rate`` (Marin draws from a seeded RNG per file), and
``max_sample_size`` keeps the documents with the lowest such hashes -- so the same inputs and seed
always give the same training set, whatever the file order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from marin_assets.core.io import read_jsonl_gz
from marin_assets.core.shard_stage import find_shards


@dataclass(frozen=True)
class DatasetConfig:
    """One labelled source of a classifier's training data (Marin's fields).

    Attributes:
        input_doc_path: folder of Dolma-format ``.jsonl.gz`` documents (any depth).
        label: the label of every document there (``"hq"``; fastText sees ``__label__hq``).
        sampling_rate: share of the documents used.
        max_sample_size: at most this many documents (None: no cap).
    """

    input_doc_path: str
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
