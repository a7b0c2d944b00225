"""Generate the data of the shipped lm-eval tasks (``eval_tasks/docstring_*.jsonl``) from held-out docstrings.

    python -m marin_assets.experiments.make_eval_tasks [OUT_DIR]   # default: eval_data/eval_tasks/

The documents are docstrings of the Python standard library (read with ``ast`` by
:func:`~marin_assets.experiments.sample_documents.long_docstrings`) that the quickstart's sample
corpus holds out for validation (the same hash rule and fraction), so a model trained on the sample's
``train/`` split never saw them. Whitespace is collapsed; everything after that is a fixed function of
the documents' order and a seeded ``random.Random``, so a rerun on the same Python minor version
(:data:`GENERATED_WITH`; docstrings change between releases) writes byte-identical files.

* ``docstring_ppl.jsonl`` -- ``{"text"}``: whole documents (rolling loglikelihood, bits per byte);
* ``docstring_cloze.jsonl`` -- ``{"context", "target"}``: a document's first sentence without its
  last word, and that word (loglikelihood: is the word the model's greedy choice);
* ``docstring_mc.jsonl`` -- ``{"context", "choices", "label"}``: a document's opening words and four
  8-word continuations, one its own and three taken from other documents.

The task YAMLs beside the data (``docstring_*.yaml``) are written by hand.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import sys
import sysconfig
from collections.abc import Iterable, Iterator

from marin_assets.eval_data.task_data import EVAL_TASKS_DIR
from marin_assets.experiments.sample_documents import SampleDocumentsConfig, _is_validation, long_docstrings

# It lives with the experiments (it reads the sample corpus) and writes the evaluation stage's data.
OUT_DIR = EVAL_TASKS_DIR
GENERATED_WITH = (3, 11)
"""The Python minor version whose standard library the shipped files come from."""
HELD_OUT_DOCS = 200
"""Documents read (the first held-out ones in walk order): the walk stops there."""
PPL_DOCS = 40
CLOZE_DOCS = 60
MC_DOCS = 60
MC_CONTINUATION_WORDS = 8
MAX_PPL_CHARS = 1200
SEED = 0

_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])\.\s")


def held_out_docs(source_dir: str | None = None) -> Iterator[str]:
    """Held-out docstrings (the quickstart sample's validation rule), whitespace collapsed, unique, in order."""
    fraction = SampleDocumentsConfig(output_path="").validation_fraction
    seen: set[str] = set()
    for doc in long_docstrings(source_dir or sysconfig.get_paths()["stdlib"]):
        text = " ".join(doc.split())
        if text in seen or not _is_validation(doc, fraction):
            continue
        seen.add(text)
        yield text


def first_sentence(text: str) -> str | None:
    """The text up to its first sentence end (without the period), or None when there is none."""
    match = _SENTENCE_END.search(text)
    return text[: match.start() + 1].rstrip(".") if match else None


def ppl_rows(docs: Iterable[str]) -> list[dict]:
    """Whole documents of at most :data:`MAX_PPL_CHARS` characters."""
    return [{"text": d} for d in docs if len(d) <= MAX_PPL_CHARS][:PPL_DOCS]


def cloze_rows(docs: Iterable[str]) -> list[dict]:
    """First sentences of 6+ words ending in a plain word: context and that last word."""
    rows = []
    for doc in docs:
        sentence = first_sentence(doc)
        words = sentence.split() if sentence else []
        if len(words) < 6 or not re.fullmatch(r"[A-Za-z]+", words[-1]):
            continue
        rows.append({"context": " ".join(words[:-1]), "target": " " + words[-1]})
        if len(rows) == CLOZE_DOCS:
            break
    return rows


def mc_rows(docs: list[str]) -> list[dict]:
    """Opening words of a document and four continuations (its own at a seeded position)."""
    rng = random.Random(SEED)
    n = MC_CONTINUATION_WORDS
    split = [(words[: len(words) - n], words[len(words) - n :]) for words in (d.split()[:24] for d in docs)]
    split = [(ctx, cont) for ctx, cont in split if len(ctx) >= 8]
    rows = []
    for i, (context, continuation) in enumerate(split[:MC_DOCS]):
        others = [cont for j, (_, cont) in enumerate(split) if j != i and cont != continuation]
        choices = [" " + " ".join(c) for c in rng.sample(others, 3)]
        label = rng.randrange(4)
        choices.insert(label, " " + " ".join(continuation))
        rows.append({"context": " ".join(context), "choices": choices, "label": label})
    return rows


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")


def generate(out_dir: str = OUT_DIR, source_dir: str | None = None) -> dict[str, int]:
    """Write the three ``docstring_*.jsonl`` files to ``out_dir``; returns rows per file."""
    docs = list(itertools.islice(held_out_docs(source_dir), HELD_OUT_DOCS))
    files = {
        "docstring_ppl.jsonl": ppl_rows(docs),
        "docstring_cloze.jsonl": cloze_rows(docs),
        "docstring_mc.jsonl": mc_rows(docs),
    }
    os.makedirs(out_dir, exist_ok=True)
    for name, rows in files.items():
        path = os.path.join(out_dir, name)
        with open(path + ".tmp", "wb") as handle:
            handle.write(_jsonl(rows))
        os.replace(path + ".tmp", path)  # atomic: a reader never sees half a file
    return {name: len(rows) for name, rows in files.items()}


def main(argv: list[str] | None = None) -> None:
    """Generate into ``argv[0]`` (default: the shipped ``eval_tasks/``) and print the row counts."""
    args = sys.argv[1:] if argv is None else argv
    if sys.version_info[:2] != GENERATED_WITH:
        print(f"note: the shipped files come from Python {GENERATED_WITH}; this is {sys.version_info[:2]}")
    print(json.dumps(generate(args[0] if args else OUT_DIR)))


if __name__ == "__main__":
    main()
