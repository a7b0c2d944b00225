"""The shard tasks on a real (session-private) Ray cluster give the same outputs as in-process."""

from __future__ import annotations

import shutil

import pytest

from .conftest import run_pipeline

pytestmark = pytest.mark.ray


def test_pipeline_on_ray_matches_in_process(pipeline, ray_session, tmp_path):
    import ray

    assert ray.is_initialized()
    prefix = str(tmp_path / "prefix")
    shutil.copytree(f"{pipeline.prefix}/landing", f"{prefix}/landing")
    shutil.copytree(f"{pipeline.prefix}/ground_truth", f"{prefix}/ground_truth")
    # The labelled set is reused; the classifier is trained again (one fastText thread, issue 24.5):
    # a recomputation gives the same model bytes, wherever it runs.
    role = "quality_training_set"
    shutil.copytree(pipeline.path(role), prefix + pipeline.path(role).removeprefix(pipeline.prefix))
    drops = pipeline.drops[:2]
    on_ray = run_pipeline(prefix, drops, use_ray=True)
    assert on_ray.outcomes[(on_ray.steps["quality_model"].name, None)].action == "ran"
    with (
        open(f"{on_ray.path('quality_model')}/model.bin", "rb") as again,
        open(f"{pipeline.path('quality_model')}/model.bin", "rb") as first,
    ):
        assert again.read() == first.read()
    for drop in drops:
        for role in ("raw", "text"):
            outcome = on_ray.outcomes[(on_ray.steps[role].name, drop)]
            assert outcome.action == "ran"
            # The engine ran the step as a Ray task (its resources), so its shards ran as Ray tasks.
            assert outcome.metadata["pool"] == "ray"
            assert pipeline.outcomes[(pipeline.steps[role].name, drop)].metadata["pool"] == "local:1"
            assert on_ray.docs(role, drop) == pipeline.docs(role, drop), (role, drop)
        assert on_ray.attributes("quality", drop) == pipeline.attributes("quality", drop)
        assert on_ray.attributes("dedup", drop) == pipeline.attributes("dedup", drop)
        assert on_ray.docs("consolidated", drop) == pipeline.docs("consolidated", drop)
