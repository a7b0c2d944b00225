"""The pipeline on gs://: landing sensor, Dagster materialization, curation + tokenize (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import fsspec
import pytest

from marin_assets.dagster_bridge.landing_sensor import build_landing_sensor
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.execution import StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.status import read_status
from marin_assets.experiments import curation, hello_world
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from tests.execution.gcs_tokenize_steps import tokenize_steps

REPO = Path(__file__).resolve().parents[2]
SOURCE = "sample-html"


def test_landing_sensor_finds_complete_drops_in_a_gcs_landing_zone(gcs_prefix, dagster_home):
    drops = dg.DynamicPartitionsDefinition(name="drops")

    @dg.asset(partitions_def=drops)
    def curated(context) -> None:
        context.log.info(context.partition_key)

    sensor = build_landing_sensor(dg.AssetSelection.assets(curated), drops, lambda: gcs_prefix, source=SOURCE)
    write_drop(gcs_prefix, "drop-001", SampleConfig(docs_per_drop=8), SOURCE)
    write_drop(gcs_prefix, "drop-002", SampleConfig(docs_per_drop=8), SOURCE)
    fs, _ = fsspec.core.url_to_fs(gcs_prefix)
    fs.rm_file(f"{gcs_prefix}/landing/{SOURCE}/drop-002/manifest.json")  # still being uploaded
    with dg.DagsterInstance.get() as instance:
        result = sensor(dg.build_sensor_context(instance=instance))
        assert isinstance(result, dg.SensorResult)
        assert [r.partition_key for r in result.run_requests] == ["drop-001"]
        (added,) = result.dynamic_partitions_requests
        assert list(added.partition_keys) == ["drop-001"]


def test_dagster_materializes_steps_on_gcs_then_records_them_cached(gcs_prefix, dagster_home):
    experiment = Experiment(name="hello_gcs", steps=hello_world.STEPS)
    assets = build_step_assets(experiment, prefix=gcs_prefix)
    resources = {"marin_storage": MarinStorageResource(prefix=gcs_prefix), "ray": RayResource()}
    with dg.DagsterInstance.get() as instance:
        first = dg.materialize(assets, instance=instance, resources=resources)
        assert first.success
        graph = StepGraph(hello_world.STEPS, gcs_prefix)
        for node in graph.topological():
            assert read_status(node.output_path).status == "SUCCESS"
            assert node.output_path.startswith(gcs_prefix)
        for key in (["hello_world", "numbers"], ["hello_world", "stats"]):
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event.asset_materialization.metadata["marin/cached"].value is False
        second = dg.materialize(assets, instance=instance, resources=resources)
        assert second.success
        for key in (["hello_world", "numbers"], ["hello_world", "stats"]):
            event = instance.get_latest_materialization_event(dg.AssetKey(key))
            assert event.run_id == second.run_id
            assert event.asset_materialization.metadata["marin/cached"].value is True


def _curate_and_tokenize(prefix: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.execution.gcs_tokenize_steps", "--prefix", prefix, "--no_record"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.ray
def test_curation_of_two_drops_and_tokenize_on_gcs(gcs_prefix, prefix):
    first = _curate_and_tokenize(gcs_prefix)
    # 2 drops x (raw, text, quality, dedup, consolidated, cache) + training set, classifier, tokenizer
    assert first["ran"] >= 14 and first["cached"] == 0
    again = _curate_and_tokenize(gcs_prefix)
    assert again["ran"] == 0 and again["cached"] == first["ran"]

    by_role = tokenize_steps()
    steps = list(by_role.values())
    partitions = {curation.PARTITION_SET: ["drop-001", "drop-002"]}
    on_gcs, local = StepGraph(steps, gcs_prefix, partitions), StepGraph(steps, prefix, partitions)
    assert [n.hash for n in on_gcs.topological()] == [n.hash for n in local.topological()]
    assert curation.discover_drops(gcs_prefix) == ["drop-001", "drop-002"]
    tokenized = on_gcs.resolved(by_role["tokenized"])
    fs, _ = fsspec.core.url_to_fs(gcs_prefix)
    for drop in ("drop-001", "drop-002"):
        out = tokenized.partition_output_path(drop)
        assert read_status(out).status == "SUCCESS"
        assert fs.exists(f"{out}/train/shard_ledger.json")
