"""Shared fixtures of the model tests: offline env, one short-lived local Ray, the quickstart run."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from marin_resources.ray_head import stop_embedded_head  # targeted: only this temp dir's Ray

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "TOKENIZERS_PARALLELISM": "false",
}


@pytest.fixture(scope="session", autouse=True)
def offline_env():
    """No hub downloads and no W&B in any test or subprocess of this folder."""
    old = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def ray_session():
    """A private embedded Ray head for this test session (short temp dir: socket path limits)."""
    temp_dir = tempfile.mkdtemp(prefix="mrt-", dir="/tmp")
    old = os.environ.get("MARIN_RAY_TMPDIR")
    os.environ["MARIN_RAY_TMPDIR"] = temp_dir
    os.environ.pop("RAY_ADDRESS", None)
    from marin_resources.ray_connect import ensure_ray

    ensure_ray()
    yield temp_dir
    import ray

    ray.shutdown()
    stop_embedded_head(temp_dir)
    shutil.rmtree(temp_dir, ignore_errors=True)
    if old is None:
        os.environ.pop("MARIN_RAY_TMPDIR", None)
    else:
        os.environ["MARIN_RAY_TMPDIR"] = old


@pytest.fixture(scope="session")
def quickstart_run(ray_session, tmp_path_factory):
    """The "test"-size quickstart run once through the real step engine; shared by several tests."""
    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.quickstart_steps import quickstart_model_steps

    prefix = str(tmp_path_factory.mktemp("quickstart"))
    steps = list(quickstart_model_steps(size="test").values())
    report = run_steps(steps, prefix)
    failed = [(o.name, o.error) for o in report.failed]
    assert not failed, failed
    graph = StepGraph(steps, prefix)
    paths = {graph.resolved(s).name.split("/")[0]: graph.resolved(s).output_path for s in steps}
    return {"prefix": prefix, "steps": steps, "report": report, "paths": paths}
