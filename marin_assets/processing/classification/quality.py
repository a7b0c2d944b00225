"""Stage 3: fastText quality classifier (unpartitioned) and per-drop quality attributes.

The classifier is its own input: it trains on the fixed, versioned labelled set of
:mod:`~marin_assets.classifiers.quality_reference` (positives from a reference high-quality set,
negatives from a sample of raw web text), never on the drops -- drops carry no labels, and a new
drop does not change the classifier's version, so no earlier drop is re-scored. Re-training on
pinned drops is an explicit config change (``classifier_negative_drops`` of the pipeline). A
deterministic hash of the id splits the labelled set into train and held-out documents; held-out
accuracy goes into the metadata (and an asset check floors it).

The attributes step scores every document of one drop, co-sharded with the text docs::

    attributes/<shard>.jsonl.gz   {id, attributes: {<attribute>: P(positive label)}}
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from marin_assets.classifiers.quality_reference import NEGATIVE_DIR, POSITIVE_DIR
from marin_assets.core.io import list_files, read_jsonl_gz, write_json
from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import atomic_write_bytes, join_path, read_bytes

MODEL_FILE = "model.bin"
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class QualityModelConfig:
    """Config of the classifier training step (every field but ``threads`` is versioned by the pipeline)."""

    training_set_path: str
    """The labelled set (``positive/`` and ``negative/`` jsonl.gz documents)."""
    output_path: str
    """Where ``model.bin`` and ``report.json`` go."""
    positive_label: str = "hq"
    """Label of the positive class; its probability becomes the score."""
    negative_label: str = "lq"
    """Label of the negative class."""
    holdout_fraction: float = 0.2
    """Share of labelled documents kept out of training for the accuracy."""
    epoch: int = 20
    """fastText training epochs."""
    lr: float = 0.5
    """fastText learning rate."""
    word_ngrams: int = 2
    """Longest word n-gram fastText hashes."""
    dim: int = 50
    """Embedding dimension."""
    min_count: int = 1
    """Words rarer than this are ignored."""
    bucket: int = 200_000
    """Hash buckets for word n-grams: fastText's default 2M x dim floats is ~400 MB at dim 50;
    200k keeps the model ~40 MB with no accuracy loss on drop-sized data."""
    threads: int = 16
    """fastText threads (>= 16: fewer make fastText 0.9.2 NaN on small data)."""


def fasttext_line(text: str) -> str:
    """The single-line, lower-cased form fastText trains and predicts on."""
    return _WS.sub(" ", text).strip().lower()


def _is_holdout(doc_id: str, fraction: float) -> bool:
    h = int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")
    return (h % 10_000) < fraction * 10_000


def _labelled(config: QualityModelConfig) -> list[tuple[str, str, str]]:
    """(id, label, fastText line) of every document of the labelled set."""
    out = []
    for sub, label in ((POSITIVE_DIR, config.positive_label), (NEGATIVE_DIR, config.negative_label)):
        for shard in list_files(join_path(config.training_set_path, sub), ".jsonl.gz"):
            for rec in read_jsonl_gz(shard):
                line = fasttext_line(rec["text"])
                if line:
                    out.append((rec["id"], label, line))
    return out


def train_quality_model(config: QualityModelConfig) -> dict[str, Any]:
    """Step function: train the classifier, write model.bin + report.json; return metadata."""
    import fasttext

    start = time.monotonic()
    data = _labelled(config)
    if not data:
        raise RuntimeError(f"the labelled set {config.training_set_path} holds no documents")
    train = [d for d in data if not _is_holdout(d[0], config.holdout_fraction)]
    held = [d for d in data if _is_holdout(d[0], config.holdout_fraction)]
    labels = Counter(label for _, label, _ in data)
    if len(labels) < 2:
        raise RuntimeError(f"need two classes to train, got {dict(labels)}")
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as handle:
            for _, label, text in train:
                handle.write(f"__label__{label} {text}\n")
        model = fasttext.train_supervised(
            input=train_file,
            epoch=config.epoch,
            lr=config.lr,
            wordNgrams=config.word_ngrams,
            dim=config.dim,
            minCount=config.min_count,
            bucket=config.bucket,
            thread=max(16, config.threads),
            seed=0,
            verbose=0,
        )
        model_file = os.path.join(tmp, MODEL_FILE)
        model.save_model(model_file)
        with open(model_file, "rb") as handle:
            atomic_write_bytes(join_path(config.output_path, MODEL_FILE), handle.read())
    correct = 0
    confusion: Counter[str] = Counter()
    for _, label, text in held:
        predicted = model.predict(text, k=1)[0][0].removeprefix("__label__")
        correct += predicted == label
        confusion[f"{label}->{predicted}"] += 1
    accuracy = correct / len(held) if held else float("nan")
    report = {
        "labelled": len(data),
        "train": len(train),
        "holdout": len(held),
        "holdout_accuracy": accuracy,
        "labels": dict(labels),
        "confusion": dict(confusion),
    }
    write_json(join_path(config.output_path, "report.json"), report)
    return {
        **{k: v for k, v in report.items() if k != "confusion"},
        "holdout_accuracy": round(accuracy, 4),
        "confusion": table_markdown([{"true->predicted": k, "count": v} for k, v in sorted(confusion.items())]),
        "seconds": round(time.monotonic() - start, 3),
    }


_MODELS: dict[str, Any] = {}


def load_model(model_dir: str) -> Any:
    """The fastText model below ``model_dir`` (cached per process: Ray workers reuse it)."""
    import fasttext

    if model_dir not in _MODELS:
        data = read_bytes(join_path(model_dir, MODEL_FILE))
        if data is None:
            raise FileNotFoundError(join_path(model_dir, MODEL_FILE))
        with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as handle:
            handle.write(data)
            path = handle.name
        try:
            _MODELS[model_dir] = fasttext.load_model(path)
        finally:
            os.unlink(path)
    return _MODELS[model_dir]


@dataclass(frozen=True)
class QualityAttributesConfig:
    """Config of the per-drop scoring step.

    Attributes:
        input_path: the text stage's output for this drop.
        model_path: the classifier step's output.
        output_path: where ``attributes/`` goes.
        attribute: attribute name of the score.
        positive_label: label whose probability is the score.
    """

    input_path: str
    model_path: str
    output_path: str
    attribute: str = "quality_hq"
    positive_label: str = "hq"


class QualityScoreStage(DocumentStage):
    """Per document: ``{id, attributes: {<attribute>: P(positive label)}}`` (co-sharded)."""

    stage = "quality"
    out_dir = "attributes"
    output_dirs = ("attributes", "quarantine")

    def __init__(self, config: QualityAttributesConfig) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config

    def open_shard(self, shard: str) -> Any:
        return load_model(self.config.model_path)

    def process(
        self, record: dict[str, Any], model: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        labels, probs = model.predict(fasttext_line(record["text"]), k=-1)
        score = 0.0
        for label, prob in zip(labels, probs, strict=True):
            if label == f"__label__{self.config.positive_label}":
                score = float(min(1.0, max(0.0, prob)))
        counters.add(f"score_bin_{min(9, int(score * 10))}")
        return {"id": record["id"], "attributes": {self.config.attribute: round(score, 5)}}

    def summarize(self, results: list) -> dict[str, Any]:
        hist = [sum(r.counts.get(f"score_bin_{i}", 0) for r in results) for i in range(10)]
        return {
            "documents": sum(hist),
            "score_histogram": table_markdown(
                [{"score": f"{i / 10:.1f}-{(i + 1) / 10:.1f}", "documents": h} for i, h in enumerate(hist)]
            ),
        }


def run_quality_attributes(config: QualityAttributesConfig) -> dict[str, Any]:
    """Step function: score every document of the drop; returns metadata."""
    meta = QualityScoreStage(config).run()
    return {k: v for k, v in meta.items() if not k.startswith("score_bin_")}
