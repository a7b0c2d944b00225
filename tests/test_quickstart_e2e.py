"""The README's main job at test size: sample drops -> curated docs -> model -> eval, recorded in Dagster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge import asset_key_for
from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.experiments import curation, quickstart

REPO = Path(__file__).resolve().parents[1]
DROPS = ["drop-001", "drop-002"]


def run_quickstart(prefix: str, dagster_home: str) -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DAGSTER_HOME": dagster_home,
        "MARIN_RAY_TMPDIR": os.environ.get("MARIN_RAY_TMPDIR", f"/tmp/mrq-{os.getpid()}"),
    }
    cmd = [
        sys.executable,
        "-m",
        "marin_assets.experiments.quickstart",
        "--size",
        "test",
        "--sample_docs",
        "120",
        "--sample_drops",
        "2",
        "--prefix",
        prefix,
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    # executor_main's JSON line; the human summary follows it.
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith('{"run_id"')))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_quickstart_end_to_end_then_fully_cached(prefix, dagster_home):
    first = run_quickstart(prefix, dagster_home)
    steps = quickstart.build_steps("test")
    graph = StepGraph([steps["evaluation"]], prefix, {"drops": DROPS})
    units = [(n, p) for n in graph.topological() for p in (DROPS if n.partitioned_by else [None])]
    assert first["ran"] == len(units)
    for node, partition in units:
        assert read_status(node.partition_output_path(partition)).status == "SUCCESS", node.name

    train = read_metadata(graph.resolved(steps["train"]).output_path)
    assert train["final_loss"] < train["initial_loss"] - 0.5
    evaluation_dir = Path(graph.resolved(steps["evaluation"]).output_path)
    results = json.loads(next(evaluation_dir.rglob("results.json")).read_text())
    for task in ("marin_docstring_mc", "marin_docstring_cloze", "marin_docstring_ppl", "levanter_validation/heldout"):
        assert task in results["results"], task
    # The tokenizer reads the reference drop only; every drop has its own cache.
    tokenizer = graph.resolved(steps["tokenizer"])
    assert tokenizer.version["config"]["input_paths.[0]"].startswith("DEP[0]@drop-001/")
    for drop in DROPS:
        cache = read_metadata(graph.resolved(steps["tokenized"]).partition_output_path(drop))
        assert cache["tokens"] > 0

    # The run is in the Dagster instance: every asset has a materialization.
    instance = dg.DagsterInstance.get()
    for node in graph.topological():
        assert instance.get_latest_materialization_event(asset_key_for(node.name)) is not None, node.name
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"marin/run_id": first["run_id"]}))
    assert len(runs) == len(DROPS) + 1 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)

    second = run_quickstart(prefix, dagster_home)
    assert second["ran"] == 0 and second["cached"] == len(units)
    # Adding nothing changed no path: the curation steps of the quickstart are the curation experiment's.
    assert graph.resolved(steps["consolidated"]) is graph.resolved(curation.STEPS["consolidated"])
