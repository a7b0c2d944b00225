"""Partitions by default in Dagster: an experiment that names no partition source gets the one its
raw step declares (the drops of a landing zone); a config field that merely holds a landing path
declares nothing, and with no source the run fails saying what to pass."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, InputName, this_output_path, this_partition
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.storage import atomic_write_text
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.zone import LandingDrops


@dataclass(frozen=True)
class ReadDropConfig:
    output_path: str
    drop_id: str
    landing_dir: Any = None


@dataclass(frozen=True)
class CountConfig:
    output_path: str
    inputs: Any = field(default_factory=list)


def read_drop(config: ReadDropConfig) -> None:
    atomic_write_text(os.path.join(config.output_path, "drop.json"), json.dumps(config.drop_id))


def count(config: CountConfig) -> dict[str, int]:
    atomic_write_text(os.path.join(config.output_path, "n.json"), json.dumps(len(config.inputs)))
    return {"drops": len(config.inputs)}


def _steps(landing: bool) -> ExecutorStep:
    raw = ExecutorStep(
        "pd/raw",
        read_drop,
        # The config names the landing folder either way: only the declaration makes it the source.
        ReadDropConfig(this_output_path(), this_partition(), InputName.hardcoded("landing/web")),
        partitioned_by="drops",
        partition_source=LandingDrops("landing/web") if landing else None,
    )
    return ExecutorStep("pd/count", count, CountConfig(this_output_path(), raw.partitions()))


def _materialize(tmp_path, monkeypatch, landing: bool) -> dg.ExecuteInProcessResult:
    prefix = str(tmp_path / "prefix")
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=5), "web")
    write_drop(prefix, "drop-002", SampleConfig(docs_per_drop=5), "web")
    defs = build_definitions([Experiment("pd", [_steps(landing)])])  # no partitions= anywhere
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=dg.DagsterInstance.ephemeral(), asset_selection=[asset_key_for("pd/count")], raise_on_error=False
    )


def test_dagster_materialization_uses_the_landing_zone_drops(tmp_path, monkeypatch):
    result = _materialize(tmp_path, monkeypatch, landing=True)
    assert result.success
    by_key = {
        (e.asset_key.to_user_string(), e.partition): e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    assert by_key[("pd/count", None)]["drops"].value == 2
    assert {("pd/raw", "drop-001"), ("pd/raw", "drop-002")} <= set(by_key)  # brought along


def test_dagster_materialization_without_any_partition_source_fails_saying_what_to_pass(tmp_path, monkeypatch):
    result = _materialize(tmp_path, monkeypatch, landing=False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    message = failure.step_failure_data.user_failure_data.description
    assert "pd/count" in message and "partitions={'drops': [...keys]}" in message
