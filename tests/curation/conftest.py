"""Fixtures of the curation tests: a sample landing zone, one pipeline run shared by the session,
and a per-session Ray (started only by tests that ask for it, stopped at the end)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import pytest

from marin_assets.core.io import list_files, read_jsonl_gz
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import run_steps
from marin_assets.execution.storage import join_path
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.curation import PARTITION_SET
from marin_assets.experiments.curation_pipeline import curation_steps
from marin_assets.experiments.sample_data import SampleConfig, ground_truth_path, write_drop

SOURCE = "sample-html"
DROPS = ["drop-001", "drop-002", "drop-003"]
# Small drops keep the whole folder fast; the generator's defaults are bigger.
SMALL = SampleConfig(docs_per_drop=240)


@dataclass
class PipelineRun:
    """A finished pipeline run over the sample drops."""

    prefix: str
    drops: list[str]
    steps: dict[str, Any]
    graph: StepGraph
    outcomes: dict[tuple[str, str | None], Any]

    def path(self, role: str, drop: str | None = None) -> str:
        node = self.graph.resolved(self.steps[role])
        return node.partition_output_path(drop)

    def docs(self, role: str, drop: str) -> list[dict[str, Any]]:
        return [r for f in list_files(join_path(self.path(role, drop), "docs"), ".jsonl.gz") for r in read_jsonl_gz(f)]

    def attributes(self, role: str, drop: str) -> dict[str, dict[str, Any]]:
        # Marin's layout: an attribute file has its document file's path (``docs/<shard>``).
        files = list_files(join_path(self.path(role, drop), "docs"), ".jsonl.gz")
        return {r["id"]: r["attributes"] for f in files for r in read_jsonl_gz(f)}

    def truth(self, drop: str) -> dict[str, Any]:
        with open(ground_truth_path(self.prefix, SOURCE, drop)) as handle:
            return json.load(handle)


def run_pipeline(prefix: str, drops: list[str], use_ray: bool = False) -> PipelineRun:
    """Run every curation step for ``drops`` under ``prefix`` with the real runner."""
    steps = curation_steps(f"landing/{SOURCE}", use_ray=use_ray)
    partitions = {PARTITION_SET: drops}
    # One unit at a time: drops must be deduplicated in id order.
    report = run_steps(list(steps.values()), prefix, ExecutorOptions(max_concurrent=1), partitions=partitions)
    graph = StepGraph(list(steps.values()), prefix, partitions)
    outcomes = {(o.name, o.partition): o for o in report.outcomes}
    return PipelineRun(prefix, drops, steps, graph, outcomes)


@pytest.fixture(scope="session")
def landing_prefix(tmp_path_factory) -> str:
    """A prefix whose landing zone holds the three sample drops (generated once per session)."""
    prefix = str(tmp_path_factory.mktemp("curation") / "prefix")
    for drop in DROPS:
        write_drop(prefix, drop, SMALL, SOURCE)
    return prefix


@pytest.fixture(scope="session")
def pipeline(landing_prefix) -> PipelineRun:
    """The whole pipeline run once over the three drops (in-process, no Ray)."""
    return run_pipeline(landing_prefix, DROPS)


@pytest.fixture(scope="session")
def ray_session():
    """A Ray cluster private to this test session, stopped afterwards."""
    tmp = tempfile.mkdtemp(prefix="mrc-", dir="/tmp")
    old = os.environ.get("MARIN_RAY_TMPDIR")
    os.environ["MARIN_RAY_TMPDIR"] = tmp
    import ray

    from marin_resources.ray_connect import ensure_ray
    from marin_resources.ray_head import stop_embedded_head

    ensure_ray()
    yield
    ray.shutdown()
    stop_embedded_head(tmp)
    if old is None:
        os.environ.pop("MARIN_RAY_TMPDIR", None)
    else:
        os.environ["MARIN_RAY_TMPDIR"] = old
