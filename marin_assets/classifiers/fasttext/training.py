"""Marin's ``marin.classifiers.fasttext.training``: train a fastText classifier on labelled text.

:func:`train_model` is the core of the training step
(:mod:`marin_assets.processing.classification.fasttext.train_fasttext`): it formats each example as
``__label__<label> <text>`` (:func:`fasttext_line`: one line, lower case, whitespace collapsed --
the same form inference predicts on), splits off ``val_frac`` of the documents by a hash of
``(seed, id)`` (a document is in the same split every run), trains with
``fasttext.train_supervised(**fasttext_args)`` and writes into ``output_path``::

    model.bin     the classifier (inference loads <model dir>/model.bin)
    data.train    the training lines, data.val the held-out lines (as Marin uploads them)
    report.json   counts, labels, held-out accuracy and confusion

One adjustment to ``fasttext_args``: a ``thread`` below 16 is raised to 16, because fastText 0.9.2
("fasttext-numpy2-wheel") reports "Encountered NaN" on small data with few threads; threads only
parallelise the same SGD objective (hogwild), so the adjustment changes speed, not what is learnt.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from marin_assets.classifiers.utils import sample_key
from marin_assets.core.io import write_json
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import atomic_write_bytes, join_path, read_bytes

MODEL_FILE = "model.bin"
MIN_THREADS = 16
_WS = re.compile(r"\s+")


def fasttext_line(text: str) -> str:
    """The single-line, lower-cased form fastText trains and predicts on."""
    return _WS.sub(" ", text).strip().lower()


def train_model(
    examples: Iterable[tuple[str, str, str]],
    output_path: str,
    seed: int = 0,
    val_frac: float = 0.1,
    **fasttext_args: Any,
) -> dict[str, Any]:
    """Train on ``(id, label, text)`` examples and write the model; returns metadata.

    Raises:
        RuntimeError: no examples, or fewer than two labels.
    """
    import fasttext

    start = time.monotonic()
    data = [(doc_id, label, line) for doc_id, label, text in examples if (line := fasttext_line(text))]
    if not data:
        raise RuntimeError(f"no labelled documents to train {output_path} on")
    labels = Counter(label for _, label, _ in data)
    if len(labels) < 2:
        raise RuntimeError(f"need two labels to train {output_path}, got {dict(labels)}")
    held = [d for d in data if sample_key(seed, d[0]) < val_frac]
    train = [d for d in data if sample_key(seed, d[0]) >= val_frac]
    args = {"seed": seed, "verbose": 0, **fasttext_args}
    args["thread"] = max(MIN_THREADS, int(args.get("thread", MIN_THREADS)))
    train_text = "".join(f"__label__{label} {line}\n" for _, label, line in train)
    val_text = "".join(f"__label__{label} {line}\n" for _, label, line in held)
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "data.train")
        with open(train_file, "w", encoding="utf-8") as handle:
            handle.write(train_text)
        model = fasttext.train_supervised(input=train_file, **args)
        model_file = os.path.join(tmp, MODEL_FILE)
        model.save_model(model_file)
        with open(model_file, "rb") as handle:
            atomic_write_bytes(join_path(output_path, MODEL_FILE), handle.read())
    atomic_write_bytes(join_path(output_path, "data.train"), train_text.encode("utf-8"))
    atomic_write_bytes(join_path(output_path, "data.val"), val_text.encode("utf-8"))
    correct = 0
    confusion: Counter[str] = Counter()
    for _, label, line in held:
        predicted = model.predict(line, k=1)[0][0].removeprefix("__label__")
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
        "fasttext_args": {k: v for k, v in args.items() if k != "verbose"},
    }
    write_json(join_path(output_path, "report.json"), report)
    return {
        **{k: v for k, v in report.items() if k not in ("confusion", "fasttext_args")},
        "holdout_accuracy": round(accuracy, 4),
        "confusion": table_markdown([{"true->predicted": k, "count": v} for k, v in sorted(confusion.items())]),
        "seconds": round(time.monotonic() - start, 3),
    }


_MODELS: dict[str, Any] = {}


def model_file(model_name: str) -> str:
    """The ``model.bin`` of ``model_name`` (a model folder, or the ``.bin`` file itself)."""
    return model_name if model_name.endswith(".bin") else join_path(model_name, MODEL_FILE)


def load_model(model_name: str) -> Any:
    """The fastText model at ``model_name`` (cached per process: Ray workers reuse it).

    Raises:
        FileNotFoundError: naming the missing ``model.bin``.
    """
    import fasttext

    if model_name not in _MODELS:
        path = model_file(model_name)
        data = read_bytes(path)
        if data is None:
            raise FileNotFoundError(f"no fastText model at {path}")
        with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as handle:
            handle.write(data)
            local = handle.name
        try:
            _MODELS[model_name] = fasttext.load_model(local)
        finally:
            os.unlink(local)
    return _MODELS[model_name]
