"""The datashop's quality classifier: fastText trained on the labeller's scores (Marin trains a BERT/GTE
regressor with ``marin.classifiers.hf``; this project's classifier is fastText, the curation pipeline's).

``train_quality_classifier(DatashopClassifierConfig(input_doc_path, attribute_path, output_path))`` reads the
labelled documents and their co-sharded datashop attributes (``{"id", "attributes": {"datashop": {"score",
"parsed"}}}``, written by ``run_medu_dataset_sampling_pipeline``), labels each parsed document
``__label__<score>`` and trains with :func:`marin_assets.classifiers.fasttext.training.train_model` (same
outputs: ``model.bin``, ``data.train``, ``data.val``, ``report.json``). Unparsed documents are left out and
counted. Scoring with ``run_inference`` then adds ``score`` -- the expected score under the classifier's
label probabilities -- beside them, which the datashop's consolidate filter keeps the top share of.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from marin_assets.classifiers.fasttext.training import train_model
from marin_assets.core.documents import step_path
from marin_assets.core.io import iter_records
from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.utils import rebase_file_path

LABELLED_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl")


@dataclass
class DatashopClassifierConfig:
    """Attributes:
    input_doc_path: the labelled documents (a ``default_label`` step's output).
    attribute_path: their datashop attributes (co-sharded: same relative paths).
    output_path: where the classifier goes.
    attribute_name: the attribute holding ``score``.
    fasttext_args: ``fasttext.train_supervised`` arguments.
    seed: the train/held-out split's seed.
    val_frac: share of documents held out to measure accuracy.
    """

    input_doc_path: StepPath
    attribute_path: StepPath
    output_path: StepPath
    attribute_name: str = "datashop"
    fasttext_args: dict = field(default_factory=lambda: {"epoch": 25, "wordNgrams": 2, "thread": 1})
    seed: int = 0
    val_frac: float = 0.1


def scored_documents(config: DatashopClassifierConfig, counts: dict[str, int]) -> Iterator[tuple[str, str, str]]:
    """``(id, score, text)`` of every document whose answer parsed, documents and attributes read in lockstep.

    Raises:
        FileNotFoundError: no labelled documents.
        ValueError: attributes that are not co-sharded with the documents (file and line named).
    """
    docs, attributes = step_path(config.input_doc_path), step_path(config.attribute_path)
    shards = sorted({s for suffix in LABELLED_SUFFIXES for s in find_shards(docs, suffix)})
    if not shards:
        raise FileNotFoundError(f"no labelled documents below {config.input_doc_path}")
    for shard in shards:
        attr_file = rebase_file_path(docs, shard, attributes)
        attrs = iter_records(attr_file)
        for line, doc in iter_records(shard):
            if not isinstance(doc.get("generated_text"), str):
                continue  # quarantined by the processor: it has no attribute record
            attr_line, attr = next(attrs, (None, None))
            if attr is None or attr.get("id") != doc.get("id"):
                raise ValueError(
                    f"{attr_file}:{attr_line}: attribute record {None if attr is None else attr.get('id')!r} where "
                    f"{shard}:{line} has document {doc.get('id')!r} (attributes must be co-sharded)"
                )
            value = (attr.get("attributes") or {}).get(config.attribute_name) or {}
            if not value.get("parsed") or not isinstance(doc.get("text"), str):
                counts["unparsed"] = counts.get("unparsed", 0) + 1
                continue
            counts["scored"] = counts.get("scored", 0) + 1
            yield str(doc.get("id")), str(value["score"]), doc["text"]


def train_quality_classifier(config: DatashopClassifierConfig) -> dict[str, Any]:
    """Step function: train the fastText classifier on the parsed scores; returns metadata."""
    counts: dict[str, int] = {}
    meta = train_model(
        scored_documents(config, counts), step_path(config.output_path), seed=config.seed, val_frac=config.val_frac,
        **config.fasttext_args,
    )  # fmt: skip
    return {**meta, "unparsed_left_out": counts.get("unparsed", 0)}
