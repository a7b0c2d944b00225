"""Issue 24.5: the fastText classifier step is reproducible, with the user's arguments as given."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from marin_assets.classifiers.utils import DatasetConfig
from marin_assets.processing.classification.fasttext.train_fasttext import TrainFasttextClassifierConfig, train

# Marin's integration test (tests/conformance/scripts/integration.py), and a small model whose input
# matrix is small enough to come from the heap (fastText 0.9.2 leaves 9/10 of it uninitialised
# with one thread: garbage, "Encountered NaN", before the child process zero-filled it).
MARIN_INTEGRATION = {"lr": 0.1, "minCount": 1, "epoch": 25, "wordNgrams": 2, "dim": 50, "thread": 1}
SMALL_MATRIX = {"epoch": 10, "lr": 0.5, "dim": 10, "thread": 1}


def _labelled(root: Path) -> list[DatasetConfig]:
    topics = ["budget", "library", "harbour", "council", "school", "river", "museum", "railway"]
    good = [f"the committee reviewed the {topics[i % 8]} proposal {i} and approved its plan" for i in range(80)]
    spam = [f"BUY NOW cheap {topics[i % 8]} pills {i} click here win money free casino" for i in range(80)]
    for name, texts in (("hq", good), ("lq", spam)):
        (root / name).mkdir(parents=True)
        lines = "".join(json.dumps({"id": f"{name}-{i}", "text": t}) + "\n" for i, t in enumerate(texts))
        (root / name / "part.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    return [DatasetConfig(str(root / "hq"), "hq"), DatasetConfig(str(root / "lq"), "lq")]


@pytest.mark.parametrize("fasttext_args", [MARIN_INTEGRATION, SMALL_MATRIX], ids=["marin_integration", "small_matrix"])
def test_two_runs_give_identical_model_bytes_with_arguments_as_given(tmp_path, fasttext_args):
    datasets = _labelled(tmp_path / "data")
    runs = []
    for run in ("first", "second"):
        out = tmp_path / run
        meta = train(TrainFasttextClassifierConfig(str(out), datasets, dict(fasttext_args), val_frac=0.2))
        runs.append(((out / "model.bin").read_bytes(), json.loads((out / "report.json").read_text()), meta))
    (first, report, meta), (second, _, _) = runs
    assert first == second and len(first) > 1000
    # Applied as given: one thread stays one thread (it was raised to 16, and hogwild made runs differ).
    assert report["fasttext_args"] == {"seed": 0, **fasttext_args}
    assert meta["holdout_accuracy"] == 1.0


def test_training_failure_names_fasttexts_own_message(tmp_path):
    datasets = _labelled(tmp_path / "data")
    with pytest.raises(RuntimeError, match="fastText training failed .*loss"):
        train(TrainFasttextClassifierConfig(str(tmp_path / "out"), datasets, {"loss": "no-such-loss", "thread": 1}))
