"""The datashop recipe end to end on the sample drops, on CPU, with a model trained here (never downloaded):
a tiny Llama (the project's own tokenizer) taught to grade page snippets answers the labelling prompt for
every annotation document; the answers become scores (attributes in Marin's layout), a fastText classifier is
trained on them, scores the pretraining pool, and consolidate keeps the top half -- through the engine,
with Marin's step names, then cached on a second run."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from marin_assets.execution.runner import run_steps
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.sample_data import SampleConfig, generate_drop
from marin_assets.web.convert import convert_page
from tests.generation.tiny_lm import build_tiny_lm

SNIPPET = 160


def _write(path: Path, records: list[dict]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    return str(path.parent)


def _read(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.rglob("*.jsonl.gz")):
        if "quarantine" not in path.parts:
            with gzip.open(path, "rt") as handle:
                out += [json.loads(line) for line in handle]
    return out


@pytest.mark.slow  # trains a tiny language model (~1 min on 2 busy cores), then five steps
@pytest.mark.timeout(900)
def test_datashop_labels_trains_filters_the_sample_drop_and_reruns_cached(tmp_path, prefix):
    from experiments.datashop.defaults import (
        default_consolidate,
        default_label,
        default_quality_filter,
        default_train_quality_model,
    )

    records, truth = generate_drop("drop-001", SampleConfig(docs_per_drop=160))
    docs = []
    for record in records:
        text = convert_page(record["text"])["content"].strip()
        if text:
            docs.append({"id": record["id"], "text": text})
    labels = {d["id"]: truth["labels"][d["id"]] for d in docs}
    annotation = [{"id": d["id"], "text": d["text"][:SNIPPET]} for d in docs[:100]]
    annotation_path = _write(tmp_path / "annotation" / "docs" / "part-0.jsonl.gz", annotation)
    pool_path = _write(tmp_path / "pool" / "docs" / "part-0.jsonl.gz", docs)

    # The annotator: taught on other snippets of the same drop what a grade looks like.
    teach = [(d["text"][:SNIPPET] + "\n", f"Final score: {5 if labels[d['id']] == 'hq' else 1}") for d in docs[100:]]
    model = build_tiny_lm(tmp_path / "annotator", [d["text"] for d in docs], examples=teach, steps=300)

    labelled = default_label(
        annotation_path, [], "tiny", None, annotator_model_name_or_path=str(model), data_filter_prompt="{example}\n",
        text_generation_inference_config_kwargs={
            "filetype": "jsonl.gz", "engine_kwargs": {}, "batch_size": 16,
            "generation_kwargs": {"max_tokens": 12, "temperature": 0.0},
        },
    )  # fmt: skip
    classifier = default_train_quality_model(labelled, "tiny", None, {"processor_type": "finalscore0-5"})
    attributes = default_quality_filter(classifier, pool_path, "sample-pool", "tiny", {"filetype": "jsonl.gz"})
    filtered = default_consolidate(
        attributes, pool_path, "sample-pool", "tiny", {"keep_fraction": 0.5}, {"filetype": "jsonl.gz"}
    )
    report = run_steps([filtered], prefix)
    assert sorted(o.name for o in report.outcomes if o.action == "ran") == [
        "attributes/quality_filtering/datashop/sample-pool-tiny",
        "classifiers/datashop-fasttext/tiny",
        "documents/datashop-datasets/tiny",
        "documents/datashop-labels/tiny",
        "documents/quality_filtering/datashop/sample-pool-tiny",
    ], report.outcomes
    graph = StepGraph([filtered], prefix)
    path = {s.name: Path(graph.resolved(s).output_path) for s in (labelled, classifier, attributes, filtered)}
    assert path[labelled.name] == Path(prefix, "documents/datashop-labels/tiny")  # Marin's fixed path

    answers = _read(path[labelled.name])
    assert len(answers) == len(annotation)
    (dataset_dir,) = Path(prefix, "documents/datashop-datasets").iterdir()  # documents/datashop-datasets/tiny-<hash>
    dataset = json.loads((dataset_dir / ".executor_metadata.json").read_text())
    assert dataset["labelled"] == len(annotation)
    parsed = {a["id"]: a for a in _read(dataset_dir / "attributes")}
    graded = {
        i: a["attributes"]["datashop"]["score"] for i, a in parsed.items() if a["attributes"]["datashop"]["parsed"]
    }
    assert len(graded) >= 0.8 * len(annotation) and dataset["unparsable"] == len(annotation) - len(graded)
    agree = sum((score >= 3) == (labels[i] == "hq") for i, score in graded.items())
    assert agree >= 0.75 * len(graded), (agree, len(graded))

    scores = {r["id"]: r["attributes"]["datashop-tiny"]["score"] for r in _read(path[attributes.name])}
    assert len(scores) == len(docs) and all(1 <= s <= 5 for s in scores.values())
    kept = [r["id"] for r in _read(path[filtered.name])]
    assert abs(len(kept) - len(docs) / 2) <= 0.1 * len(docs)
    share = sum(labels[i] == "hq" for i in kept) / len(kept)
    assert share > sum(v == "hq" for v in labels.values()) / len(labels)  # the filter prefers good pages

    again = run_steps([filtered], prefix)
    assert {o.action for o in again.outcomes} == {"cached"}
