"""The datashop's answers -> scores: Marin's two formats parsed robustly (an answer without a score is
counted as -1, never a crash), written as training examples and as attributes in Marin's layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from marin.datashop.dataset_processor import (
    AutoDatasetOutputProcessor,
    FinalScoreZeroToFiveDatasetOutputProcessor,
    MeduDatasetOutputProcessor,
)


@pytest.mark.parametrize(
    ("answer", "score"),
    [
        ("Clear and correct.\nFinal Score: Great", 5),
        ("Final Score: **Poor**", 2),
        ("Options: Great, Good, Okay, Poor, Useless. Final Score: Okay. Final Score: Useless", 1),
        ("final score: great", -1),  # Marin's medu format is case-sensitive
        ("", -1),
        ("Final Score: Excellent", -1),
    ],
)
def test_medu_scores(answer, score):
    assert MeduDatasetOutputProcessor.extract_score(answer) == score


@pytest.mark.parametrize(
    ("answer", "score"),
    [("Final score: 3", 3), ("FINAL SCORE:5", 5), ("final score: 7", -1), ("Final score: 4.5", -1), ("3", -1)],
)
def test_zero_to_five_scores(answer, score):
    assert FinalScoreZeroToFiveDatasetOutputProcessor.extract_score(answer) == score


def test_unknown_processor_type_names_the_known_ones():
    with pytest.raises(ValueError, match="finalscore0-5, medu"):
        AutoDatasetOutputProcessor.from_processor_type("in", "out", "bert")


def test_converted_examples_and_attributes_count_unparsable_answers(tmp_path):
    from marin.datashop.dataset_processor import DatasetOutputProcessorConfig
    from marin.datashop.pipeline import run_medu_dataset_sampling_pipeline

    labels = tmp_path / "labels"
    (labels / "x").mkdir(parents=True)
    records = [
        {"id": "d1", "text": "alpha", "generated_text": "Final score: 4"},
        {"id": "d2", "text": "beta", "generated_text": "I cannot decide."},
        {"id": "d3", "text": "gamma", "generated_text": None},
        {"id": "d4", "text": "delta", "generated_text": "final score: 1"},
    ]
    with gzip.open(labels / "x" / "part.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    out = tmp_path / "out"
    meta = run_medu_dataset_sampling_pipeline(
        DatasetOutputProcessorConfig(input_path=str(labels), output_path=str(out), processor_type="finalscore0-5")
    )
    assert meta["labelled"] == 3 and meta["unparsable"] == 1 and meta["quarantined"] == 1
    assert {k: v for k, v in meta["score_distribution"].items() if v} == {"-1": 1, "1": 1, "4": 1}

    def read(path: Path) -> list[dict]:
        with gzip.open(path, "rt") as handle:
            return [json.loads(line) for line in handle]

    assert read(out / "converted" / "x" / "part.jsonl.gz") == [
        {"id": "d1", "text": "alpha", "label": 4},
        {"id": "d4", "text": "delta", "label": 1},
    ]
    assert read(out / "attributes" / "x" / "part.jsonl.gz") == [
        {"id": "d1", "attributes": {"datashop": {"score": 4, "parsed": True}}},
        {"id": "d2", "attributes": {"datashop": {"score": -1, "parsed": False}}},
        {"id": "d4", "attributes": {"datashop": {"score": 1, "parsed": True}}},
    ]
    assert sorted(r["id"] for r in read(out / "sampled" / "x" / "part.jsonl.gz")) == ["d1", "d4"]
    quarantine = (out / "converted" / "quarantine" / "x__part.jsonl").read_text()
    assert '"d3"' in quarantine and "no_generated_text" in quarantine


def test_no_parsable_answer_fails_the_step_saying_so(tmp_path):
    from marin.datashop.dataset_processor import DatasetOutputProcessorConfig
    from marin.datashop.pipeline import run_medu_dataset_sampling_pipeline

    labels = tmp_path / "labels"
    labels.mkdir()
    with gzip.open(labels / "p.jsonl.gz", "wt") as handle:
        handle.write(json.dumps({"id": "a", "text": "t", "generated_text": "no idea"}) + "\n")
    with pytest.raises(ValueError, match="none of the 1 answers"):
        run_medu_dataset_sampling_pipeline(
            DatasetOutputProcessorConfig(input_path=str(labels), output_path=str(tmp_path / "o"), processor_type="medu")
        )
