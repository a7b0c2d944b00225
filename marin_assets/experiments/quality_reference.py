"""The fixed, versioned labelled set the quality classifier learns from (DCLM style).

DCLM trains its fastText filter on positives from a reference high-quality set (OpenHermes,
ELI5) and negatives from a random sample of raw web text; drops themselves carry no labels. Here,
offline and small:

* **positives** (``hq``): documents of consecutive prose sentences from the docstrings of the
  Python standard library (:func:`~marin_assets.experiments.sample_data.sentence_pool`) -- curated,
  edited text, our stand-in for a reference corpus;
* **negatives** (``lq``): a sample of raw web text -- pages of the sample web generator from a
  reference crawl that no drop uses (its own seed and drop number), passed through the same
  main-content extraction as the text stage. Like a random web sample it is mostly spam and
  fragments with some good pages mixed in;
* optionally, a sample of the text of **pinned drops** (``negative_drop_paths``), also as
  negatives. Pinning drops is an explicit config change: a new drop never changes this set.

Everything is deterministic in ``(seed, sizes, pinned paths)``, so the set -- and the classifier
trained on it -- keeps its version until someone changes the config.

Output::

    positive/docs-00000.jsonl.gz   {id, text}
    negative/docs-00000.jsonl.gz   {id, text}
    report.json                    counts per class and source
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

from marin_assets.core.io import list_files, read_jsonl_gz, write_json, write_jsonl_gz
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import join_path
from marin_assets.experiments.sample_data import SampleConfig, generate_drop, sentence_pool
from marin_assets.schemas.web.convert import ResiliparseConfig
from marin_assets.web.convert import convert_page

POSITIVE_DIR = "positive"
NEGATIVE_DIR = "negative"
# The reference crawl's drop number: far above any sample drop, so its pages are its own.
REFERENCE_CRAWL_DROP = "reference-crawl-900"


@dataclass(frozen=True)
class QualityTrainingSetConfig:
    """Config of the labelled-set step (every field but ``output_path`` is versioned by the pipeline)."""

    output_path: StepPath
    """Where ``positive/``, ``negative/`` and ``report.json`` go."""
    documents_per_class: int = 1200
    """Reference documents of each class (the pinned-drop sample comes on top of the negatives)."""
    web_lq_fraction: float = 0.95
    """Share of spam/fragment pages in the reference crawl (the rest are good pages, as on the web)."""
    seed: int = 7
    """Seed of the reference set; distinct from the sample drops' seed."""
    negative_drop_paths: list[StepPath] = field(default_factory=list)
    """Text-stage outputs of pinned drops whose documents are sampled as extra negatives."""
    documents_per_pinned_drop: int = 200
    """How many documents each pinned drop contributes (a fixed sample, chosen by id hash)."""


def reference_positives(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` documents of 3-10 consecutive docstring sentences, at seeded positions."""
    pool = sentence_pool()
    rng = random.Random(f"quality-positives:{seed}")
    docs = []
    for i in range(count):
        size = rng.randint(3, 10)
        start = rng.randrange(0, len(pool) - size)
        sentences = pool[start : start + size]
        split = rng.randint(1, size - 1)
        text = " ".join(sentences[:split]) + "\n\n" + " ".join(sentences[split:])
        docs.append({"id": f"reference-hq-{seed}-{i:06d}", "text": text})
    return docs


def reference_web_sample(count: int, seed: int, lq_fraction: float) -> list[dict[str, Any]]:
    """Main-content text of ``count`` pages of a reference crawl of the sample web generator."""
    config = SampleConfig(
        seed=seed,
        docs_per_drop=count,
        lq_fraction=lq_fraction,
        exact_dup_fraction=0.0,
        near_dup_fraction=0.0,
        para_dup_fraction=0.0,
        cross_exact_fraction=0.0,
        cross_near_fraction=0.0,
    )
    records, _ = generate_drop(REFERENCE_CRAWL_DROP, config)
    out = []
    for rec in records:
        # The pipeline's own extraction (resiliparse main content, paragraphs kept).
        text = convert_page(rec["text"], None, "resiliparse", ResiliparseConfig(preserve_formatting=True))["content"]
        text = text.strip()
        if text:
            out.append({"id": f"reference-web-{rec['id']}", "text": text})
    return out


def _sample_key(doc_id: str) -> bytes:
    return hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()


def pinned_drop_sample(text_path: str, count: int) -> list[dict[str, Any]]:
    """A fixed sample of ``count`` documents of a pinned drop's text output (lowest id hashes)."""
    docs = [
        {"id": rec["id"], "text": rec["text"]}
        for shard in list_files(join_path(text_path, "docs"), ".jsonl.gz")
        for rec in read_jsonl_gz(shard)
    ]
    docs.sort(key=lambda d: _sample_key(d["id"]))
    return docs[:count]


def write_quality_training_set(config: QualityTrainingSetConfig) -> dict[str, Any]:
    """Step function: write the labelled set; returns counts as metadata."""
    start = time.monotonic()
    positives = reference_positives(config.documents_per_class, config.seed)
    negatives = reference_web_sample(config.documents_per_class, config.seed, config.web_lq_fraction)
    pinned = {path: pinned_drop_sample(path, config.documents_per_pinned_drop) for path in config.negative_drop_paths}
    for docs in pinned.values():
        negatives.extend(docs)
    write_jsonl_gz(join_path(config.output_path, f"{POSITIVE_DIR}/docs-00000.jsonl.gz"), positives)
    write_jsonl_gz(join_path(config.output_path, f"{NEGATIVE_DIR}/docs-00000.jsonl.gz"), negatives)
    report = {
        "positive_documents": len(positives),
        "negative_documents": len(negatives),
        "negative_reference_web_documents": len(negatives) - sum(len(d) for d in pinned.values()),
        "negative_pinned_drop_documents": {path.rstrip("/").rsplit("/", 1)[-1]: len(d) for path, d in pinned.items()},
    }
    write_json(join_path(config.output_path, "report.json"), report)
    return {**report, "seconds": round(time.monotonic() - start, 3)}
