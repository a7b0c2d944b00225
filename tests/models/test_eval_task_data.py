"""The shipped lm-eval task data is what its generator writes: regenerating gives byte-identical files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from marin_assets.experiments import make_eval_tasks

pytestmark = pytest.mark.timeout(300)


@pytest.mark.skipif(
    sys.version_info[:2] != make_eval_tasks.GENERATED_WITH,
    reason="the shipped files come from another Python's standard-library docstrings",
)
def test_regenerating_the_eval_task_data_gives_the_shipped_bytes(tmp_path):
    counts = make_eval_tasks.generate(str(tmp_path))
    shipped = Path(make_eval_tasks.OUT_DIR)
    assert sorted(counts) == sorted(p.name for p in shipped.glob("*.jsonl"))
    for name in counts:
        assert (tmp_path / name).read_bytes() == (shipped / name).read_bytes(), name
    rows = [json.loads(line) for line in (shipped / "docstring_mc.jsonl").read_text().splitlines()]
    assert len(rows) == counts["docstring_mc.jsonl"] == make_eval_tasks.MC_DOCS
    for row in rows:
        assert len(row["choices"]) == 4 and len(set(row["choices"])) == 4 and 0 <= row["label"] < 4
