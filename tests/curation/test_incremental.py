"""Adding a drop: earlier outputs untouched, cross-drop duplicates found, consumers get new versions."""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from marin_assets.experiments.curation_pipeline import check_planted_duplicates_removed
from marin_assets.experiments.sample_data import ground_truth_path, write_drop
from marin_assets.processing.classification.dedupe import DedupeConfig, dedupe

from .conftest import DROPS, SMALL, SOURCE, run_pipeline


def _snapshot(root: str) -> dict[str, str]:
    out = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                out[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def grown(pipeline, tmp_path_factory):
    """A copy of the finished three-drop prefix, then drop-004 added and the pipeline rerun."""
    prefix = str(tmp_path_factory.mktemp("grown") / "prefix")
    shutil.copytree(pipeline.prefix, prefix)
    before = {
        role: {d: _snapshot(pipeline.path(role, d).replace(pipeline.prefix, prefix)) for d in DROPS}
        for role in ("raw", "text", "dedup")
    }
    write_drop(prefix, "drop-004", SMALL, SOURCE)
    after = run_pipeline(prefix, [*DROPS, "drop-004"])
    return pipeline, after, before


def test_earlier_outputs_untouched(grown):
    old, new, before = grown
    for role in ("raw", "text", "dedup"):
        # Same version: same paths; earlier drops are cached, not rerun, and byte-identical.
        assert old.path(role, "drop-001").replace(old.prefix, "") == new.path(role, "drop-001").replace(new.prefix, "")
        for drop in DROPS:
            assert new.outcomes[(new.steps[role].name, drop)].action == "cached"
            assert _snapshot(new.path(role, drop)) == before[role][drop]
        assert new.outcomes[(new.steps[role].name, "drop-004")].action == "ran"


def test_new_drop_leaves_classifier_and_earlier_scores_alone(grown):
    old, new, _ = grown
    # The classifier learns from its own labelled set, not from the drops: same version, cached.
    assert old.path("quality_model") == new.path("quality_model").replace(new.prefix, old.prefix)
    assert new.outcomes[(new.steps["quality_model"].name, None)].action == "cached"
    for role in ("quality", "consolidated"):
        for drop in DROPS:
            assert new.outcomes[(new.steps[role].name, drop)].action == "cached", (role, drop)
        assert new.outcomes[(new.steps[role].name, "drop-004")].action == "ran"


def test_new_drop_deduplicated_against_earlier_drops(grown):
    _, new, _ = grown
    truth = new.truth("drop-004")
    attrs = new.attributes("dedup", "drop-004")
    cross = [d for d in truth["exact_dups"] + truth["near_dups"] if not d["of"].startswith("drop-004")]
    assert cross
    for d in cross:
        assert attrs[d["id"]]["fuzzy_duplicate"] == 1, d
        assert not attrs[d["id"]]["fuzzy_duplicate_of"].startswith("drop-004")
    meta = new.outcomes[(new.steps["dedup"].name, "drop-004")].metadata
    assert meta["earlier_drops_indexed"] == DROPS
    passed, info = check_planted_duplicates_removed(
        new.path("consolidated", "drop-004"), ground_truth_path(new.prefix, SOURCE, "drop-004")
    )
    assert passed, info


def test_dedup_refuses_to_run_before_earlier_drops(pipeline, tmp_path):
    # drop-003's dedup in a fresh step folder where drop-001/002 have no index yet.
    text = pipeline.path("text", "drop-003")
    out = str(tmp_path / "dedup-x" / "drop-003")
    landing = os.path.join(pipeline.prefix, "landing", SOURCE)
    with pytest.raises(RuntimeError, match=r"drop-001.*drop-002"):
        dedupe(DedupeConfig(input_path=text, output_path=out, drop_id="drop-003", landing_dir=landing))
    # Without landing_dir it runs against whatever earlier indices exist (none here).
    meta = dedupe(DedupeConfig(input_path=text, output_path=out, drop_id="drop-003"))
    assert meta["earlier_drops_indexed"] == [] and meta["fuzzy_duplicates_of_earlier_drops"] == 0
