"""A failed drop through Dagster (issue 30.2): the landing sensor requests one run per drop; the run of a
drop whose raw step fails fails, and the later drop's run still deduplicates and consolidates against
the drops that succeeded (its run does not bring the failed drop along). The drops table and the
landing check ``no_failed_drops`` show the failed drop. Slow (three drop runs of the real pipeline)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge.landing_assets import build_landing_status_sensor
from marin_assets.definitions import build_definitions
from marin_assets.execution import StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.experiments import curation
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.zone import LandingDrops, landing_root

pytestmark = pytest.mark.slow


def test_a_failed_drop_run_does_not_stop_the_next_drops_run(prefix, dagster_home, monkeypatch):
    drops = ["drop-001", "drop-002", "drop-003"]
    for drop in drops:
        write_drop(prefix, drop, SampleConfig(docs_per_drop=120), curation.SOURCE)
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    steps = curation.build_steps(use_ray=False)
    defs = build_definitions([Experiment("curation", list(steps.values()), partitions=curation.PARTITIONS)])
    instance = dg.DagsterInstance.get()
    sensor = defs.resolve_sensor_def("landing_sensor_sample_html")
    result = sensor(dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources))
    assert [r.partition_key for r in result.run_requests] == drops
    (add,) = result.dynamic_partitions_requests
    instance.add_dynamic_partitions(add.partitions_def_name, list(add.partition_keys))

    # drop-002's file changes after the sensor verified it: its raw step fails in its run.
    broken = Path(landing_root(prefix), curation.SOURCE, "drop-002", "part-00000.jsonl.gz")
    original = broken.read_bytes()
    broken.write_bytes(original[:-10] + b"0" * 10)
    drop_job = defs.resolve_job_def("curation_drop_job")
    outcome = {}
    for request in result.run_requests:  # what the daemon launches, in order
        run = drop_job.execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False
        )
        outcome[request.partition_key] = run.success
    assert outcome == {"drop-001": True, "drop-002": False, "drop-003": True}

    graph = StepGraph(list(steps.values()), prefix, {curation.PARTITION_SET: drops})
    path = lambda role, drop: graph.resolved(steps[role]).partition_output_path(drop)  # noqa: E731
    assert read_status(path("raw", "drop-002")).status == "FAILED"
    assert read_status(path("consolidated", "drop-003")).status == "SUCCESS"
    assert read_metadata(path("dedup", "drop-003"))["deduplicated_against"] == ["drop-001"]

    # The drops table and the landing check name it (its file restored, the drop is valid again: the
    # failed run is what the table shows until the drop is re-run).
    broken.write_bytes(original)
    zones = [(LandingDrops(f"landing/{curation.SOURCE}"), curation.PARTITION_SET, [])]
    status_sensor = build_landing_status_sensor(zones)
    tick = status_sensor(dg.build_sensor_context(instance=instance, resources=defs.resources))
    observation = next(e for e in tick.asset_events if isinstance(e, dg.AssetObservation))
    rows = {r.data["drop"]: r.data["status"] for r in observation.metadata["drops"].value.records}
    assert rows["drop-002"] == "failed"
    checks = {e.check_name: e.passed for e in tick.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    assert checks["no_failed_drops"] is False
