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

The user's ``fasttext_args`` are applied as given (``thread`` included), and with the same
config and inputs the model file is **byte-identical** as long as training is single-threaded:

* ``thread=1`` (Marin's integration test, the curation pipeline): deterministic. fastText is
  seeded (``seed``, default the config's) and its one thread sees the lines in file order.
* ``thread>1``: fastText trains hogwild -- the threads update shared weights without locks, in
  whatever order the OS schedules them -- so two runs give different models (and scores of
  borderline documents) although the objective is the same. Use it for speed, not for results
  that must be recomputed exactly. ``autotune*`` settings are time-bounded and not repeatable either.

fastText 0.9.2 (``fasttext-numpy2-wheel``) initialises only ``thread``/10 of its input matrix
when ``thread`` < 10 and leaves the rest as whatever memory held: zeros when the matrix is big
enough to be a fresh mapping, reused heap garbage (random models, "Encountered NaN") when it is
small. Training therefore runs in a child process whose allocator zero-fills every allocation
(``MALLOC_PERTURB_``, tcache off): the uninitialised part is always zero, as for a big matrix,
whatever the size -- no NaN, no garbage, the same bytes every run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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
_WS = re.compile(r"\s+")
# The child that trains: fastText only (no project import, so it runs wherever the step does).
_TRAIN_CHILD = (
    "import json, sys\n"
    "import fasttext\n"
    "fasttext.train_supervised(input=sys.argv[1], **json.loads(sys.argv[3])).save_model(sys.argv[2])\n"
)
# glibc: every allocation zero-filled (MALLOC_PERTURB_=255 fills with 255 ^ 0xff), the per-thread
# cache that would skip the fill off -- fastText's uninitialised matrix part reads as zeros.
_PERTURB = "255"
_NO_TCACHE = "glibc.malloc.tcache_count=0"


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
    args = {"seed": seed, "verbose": 0, **fasttext_args}  # as given: thread and all
    train_text = "".join(f"__label__{label} {line}\n" for _, label, line in train)
    val_text = "".join(f"__label__{label} {line}\n" for _, label, line in held)
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "data.train")
        with open(train_file, "w", encoding="utf-8") as handle:
            handle.write(train_text)
        model_file = os.path.join(tmp, MODEL_FILE)
        _train_in_child(train_file, model_file, args)
        model = fasttext.load_model(model_file)
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


def _zeroing_environment() -> dict[str, str]:
    """This process's environment with the zero-filling allocator settings added (other glibc
    tunables kept)."""
    tunables = [t for t in os.environ.get("GLIBC_TUNABLES", "").split(":") if t and "tcache_count" not in t]
    return {**os.environ, "MALLOC_PERTURB_": _PERTURB, "GLIBC_TUNABLES": ":".join([*tunables, _NO_TCACHE])}


def _train_in_child(train_file: str, model_file: str, args: dict[str, Any]) -> None:
    """``fasttext.train_supervised(input=train_file, **args)`` saved to ``model_file``, in a child
    process with a zero-filling allocator (see the module docstring).

    Raises:
        RuntimeError: fastText failed; the message holds the end of its output.
    """
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN_CHILD, train_file, model_file, json.dumps(args)],
        env=_zeroing_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"fastText training failed (exit {done.returncode}): {' | '.join(tail)}")


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
