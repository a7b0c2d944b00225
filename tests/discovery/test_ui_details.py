"""What a person sees beside the assets: drop runs' tags, distinct lineage labels, the drop set not
marked changed by its first observation, the landing zone's drops table, the quickstart's UI line."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.landing_assets import drop_rows, landing_key, rows_metadata
from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.partition_sets import observation
from marin_assets.dagster_bridge.unit_run import SOURCE_TAG
from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, executor_main, this_output_path, this_partition, versioned
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.storage import atomic_write_text
from marin_assets.experiments import curation
from marin_assets.experiments.quickstart import build_steps
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from tests.dagster_private import stale_causes, stale_status


@dataclass(frozen=True)
class PartConfig:
    output_path: str
    drop: str
    value: int = 1


@dataclass(frozen=True)
class AllConfig:
    output_path: str
    inputs: Any = field(default_factory=list)


def per_drop(config: PartConfig) -> None:
    atomic_write_text(os.path.join(config.output_path, "v.json"), json.dumps(config.value))


def every_drop(config: AllConfig) -> None:
    atomic_write_text(os.path.join(config.output_path, "v.json"), json.dumps(len(config.inputs)))


def test_drop_job_launched_from_the_ui_does_not_claim_to_be_the_sensor(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    steps = curation.build_steps(use_ray=False)
    defs = build_definitions([Experiment("curation", list(steps.values()), partitions=curation.PARTITIONS)])
    drop_job = defs.resolve_job_def("curation_drop_job")
    assert SOURCE_TAG not in drop_job.tags  # sensor runs say so by dagster/sensor_name
    assert drop_job.tags["marin/experiment"] == "curation"
    assert {s.name for s in defs.sensors} >= {"landing_sensor_sample_html", "landing_status"}


def test_quickstart_lineage_labels_are_distinct_at_both_ends():
    steps = build_steps("tiny")
    labels = [asset_key_for(steps[r].name).path[-1] for r in ("tokenized", "heldout", "tokenizer", "train")]
    assert labels[:2] == ["quickstart_tiny_tokens", "quickstart_tiny_tokens_heldout"]
    # The UI middle-truncates long labels to their start and end: the ends must differ.
    assert len({label[-8:] for label in labels}) == len(labels)


def test_command_line_run_leaves_the_consumer_fresh_after_the_drop_sets_first_observation(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("MARIN_EXPERIMENTS", "")  # the location knows nothing: keys of their own
    prefix = str(tmp_path / "prefix")
    part = ExecutorStep(
        "fresh/part", per_drop, PartConfig(this_output_path(), this_partition(), versioned(1)), partitioned_by="drops"
    )
    every = ExecutorStep("fresh/every", every_drop, AllConfig(this_output_path(), part.partitions()))
    executor_main(steps=[every], argv=["--prefix", prefix], partitions={"drops": ["d1", "d2"]})

    instance = dg.DagsterInstance.get()
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    defs = build_definitions([Experiment("fresh", [every], partitions={"drops": lambda _p: []})])
    key = asset_key_for("fresh/every")
    # What the partition_sets sensor records on its first tick: the same keys, the same version.
    instance.report_runless_asset_event(observation("drops", ["d1", "d2"]))
    assert stale_status(defs, instance, key) == "FRESH", stale_causes(defs, instance, key)


def test_landing_zone_drops_table_names_each_status(tmp_path):
    prefix = str(tmp_path)
    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=10), "web")
    write_drop(prefix, "drop-002", SampleConfig(docs_per_drop=10), "web")
    os.makedirs(tmp_path / "landing" / "web" / "drop-003")  # no manifest yet: incomplete
    manifest = tmp_path / "landing" / "web" / "drop-002" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["files"][0]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(data))
    instance = dg.DagsterInstance.ephemeral()
    key = dg.AssetKey(["webcur", "consolidated"])
    instance.report_runless_asset_event(dg.AssetMaterialization(key, partition="drop-001"))
    rows = drop_rows(instance, prefix, "web", [key], verify=True)
    by_drop = {row["drop"]: row for row in rows}
    assert by_drop["drop-001"]["status"] == "processed"
    assert by_drop["drop-002"]["status"] == "rejected" and "sha256" in by_drop["drop-002"]["reason"]
    assert by_drop["drop-003"]["status"] == "incomplete"
    meta = rows_metadata(rows)
    assert meta["count/rejected"].value == 1 and "drop-002" in meta["rejected"].value
    assert [r.data["drop"] for r in meta["drops"].records] == ["drop-001", "drop-002", "drop-003"]
    assert landing_key("sample-html") == dg.AssetKey(["landing", "sample_html"])


def test_quickstart_summary_names_the_deployed_webserver(monkeypatch, tmp_path):
    from marin_assets.execution.outcomes import ExecutionReport
    from marin_assets.experiments.quickstart_output import summary

    report = ExecutionReport("r1", [])
    monkeypatch.setenv("MARIN_UI_URL", "http://127.0.0.1:39123")
    text = summary(report, build_steps("test"), str(tmp_path), "/x/dagster_home")
    assert "UI: http://127.0.0.1:39123" in text and "dagster dev" not in text
    monkeypatch.delenv("MARIN_UI_URL")
    assert "dagster dev -w workspace.yaml" in summary(report, build_steps("test"), str(tmp_path), "/x/dagster_home")
