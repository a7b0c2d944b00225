"""Two data drops end to end through Dagster: landing sensor -> partitions -> runs -> checks."""

from __future__ import annotations

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.definitions import build_definitions
from marin_assets.execution import StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.status import read_status
from marin_assets.experiments import curation
from marin_assets.experiments.sample_data import SampleConfig, write_drop


@pytest.fixture
def drops_prefix(prefix, monkeypatch) -> str:
    for drop in ("drop-001", "drop-002"):
        write_drop(prefix, drop, SampleConfig(docs_per_drop=160), curation.SOURCE)
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    return prefix


def test_two_drops_sensor_to_checks_through_dagster(drops_prefix, dagster_home):
    steps = curation.build_steps(use_ray=False)
    experiment = Experiment(
        "curation",
        list(steps.values()),
        partitions=curation.PARTITIONS,
        checks=curation.build_checks(steps),
    )
    defs = build_definitions([experiment])
    instance = dg.DagsterInstance.get()
    sensor = defs.resolve_sensor_def("landing_sensor_sample_html")

    result = sensor(dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources))
    assert [r.partition_key for r in result.run_requests] == ["drop-001", "drop-002"]
    (add_request,) = result.dynamic_partitions_requests
    instance.add_dynamic_partitions(add_request.partitions_def_name, list(add_request.partition_keys))
    # The same drops seen again start nothing new.
    again = sensor(
        dg.build_sensor_context(instance=instance, definitions=defs, cursor=result.cursor, resources=defs.resources)
    )
    assert not getattr(again, "run_requests", None)

    drop_job = defs.resolve_job_def("curation_drop_job")
    # One run per drop covers every asset of the drop; the classifier it needs is partition-free.
    local = {asset_key_for(f"curation/{r}") for r in ("raw", "text", "quality", "dedup", "consolidated")}
    assert set(drop_job.asset_layer.selected_asset_keys) == local
    checks: dict[tuple[str, str | None], bool] = {}
    materialized: list[tuple[str, str | None, bool]] = []

    def record(run: dg.ExecuteInProcessResult, partition: str | None = None) -> None:
        assert run.success
        for event in run.get_asset_check_evaluations():
            checks[(event.check_name, partition)] = event.passed
        for event in run.get_asset_materialization_events():
            mat = event.event_specific_data.materialization
            materialized.append((mat.asset_key.to_user_string(), mat.partition, mat.metadata["marin/cached"].value))

    for request in result.run_requests:  # what the daemon launches for the sensor, in order
        record(
            drop_job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags),
            request.partition_key,
        )
    # The first drop's run brought the missing classifier (and its labelled set) along, recorded
    # as materializations of their own assets; the second found it SUCCESS.
    assert ("curation/quality_model", None, False) in materialized
    assert ("curation/quality_training_set", None, False) in materialized
    assert [m for m in materialized if m[0] == "curation/quality_model"] == [("curation/quality_model", None, False)]
    # Materializing the classifier itself is cached and runs its check.
    record(
        dg.materialize(
            list(defs.assets),
            instance=instance,
            selection=[asset_key_for("curation/quality_model")],
            resources=dict(defs.resources),
        )
    )
    assert ("curation/quality_model", None, True) in materialized
    for drop in ("drop-001", "drop-002"):
        for name in ("ids_unique", "no_empty_text", "planted_duplicates_removed"):
            assert checks[(name, drop)], (name, drop)
    assert checks[("classifier_accuracy", None)]
    for drop in ("drop-001", "drop-002"):
        assert ("curation/consolidated", drop, False) in materialized

    graph = StepGraph(list(steps.values()), drops_prefix, {curation.PARTITION_SET: ["drop-001", "drop-002"]})
    for role in ("raw", "text", "quality", "dedup", "consolidated"):
        for drop in ("drop-001", "drop-002"):
            assert read_status(graph.resolved(steps[role]).partition_output_path(drop)).status == "SUCCESS"
    latest = instance.get_latest_materialization_event(asset_key_for("curation/consolidated"))
    assert latest.asset_materialization.partition == "drop-002"
    assert latest.asset_materialization.metadata["dagster/uri"].value.endswith("/drop-002")
