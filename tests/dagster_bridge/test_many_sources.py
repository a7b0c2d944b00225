"""Two landing sources in one code location, drops landing interleaved: each source has its own
partition set (named after it), sensor, drop job, drops table and lineage edge, and nothing of
one source -- partition, run, dedup input -- ever shows up in the other's."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from marin_assets.dagster_bridge.landing_assets import drop_rows, landing_key
from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.definitions import build_definitions
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.storage import join_path, read_text
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.curation_pipeline import curation_steps
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.zone import LandingDrops
from marin_assets.processing.classification.dedup_index import INDEX_COMPLETE

SOURCES = ("alpha", "beta")
PER_DROP = ("raw", "text", "quality", "dedup", "consolidated")
# Interleaved arrivals: alpha, beta, alpha, beta (distinct ids, so a foreign drop is recognisable).
ARRIVALS = [("alpha", "drop-001"), ("beta", "drop-002"), ("alpha", "drop-003"), ("beta", "drop-004")]


def _steps(source: str, **kwargs):
    return curation_steps(
        f"landing/{source}", name_prefix=source, use_ray=False, classifier_documents_per_class=60, **kwargs
    )


@pytest.fixture
def location(prefix, dagster_home, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    steps = {source: _steps(source) for source in SOURCES}
    defs = build_definitions([Experiment(source, list(steps[source].values())) for source in SOURCES])
    return prefix, steps, defs, dg.DagsterInstance.get()


def _tick(defs, instance, source, cursor):
    sensor = defs.resolve_sensor_def(f"landing_sensor_{source}")
    result = sensor(
        dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor, resources=defs.resources)
    )
    if not isinstance(result, dg.SensorResult):
        return [], cursor
    for request in result.dynamic_partitions_requests or []:  # what the daemon does with them
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return list(result.run_requests or []), result.cursor


@pytest.mark.slow
def test_two_sources_with_interleaved_drops_never_mix(location):
    prefix, steps, defs, instance = location
    small = SampleConfig(docs_per_drop=30)
    cursors: dict[str, str | None] = {source: None for source in SOURCES}
    runs: dict[str, list[str]] = {source: [] for source in SOURCES}
    for source, drop in ARRIVALS:
        write_drop(prefix, drop, small, source)
        for watcher in SOURCES:  # every sensor ticks after every arrival
            requests, cursors[watcher] = _tick(defs, instance, watcher, cursors[watcher])
            for request in requests:
                assert request.tags["marin/curation"] == watcher
                job = defs.resolve_job_def(f"{watcher}_drop_job")
                run = job.execute_in_process(instance=instance, partition_key=request.partition_key, tags=request.tags)
                assert run.success
                runs[watcher].append(request.partition_key)

    own = {source: [d for s, d in ARRIVALS if s == source] for source in SOURCES}
    assert runs == own
    for source in SOURCES:
        # Each source's partition set is named after it and holds its own drops only.
        assert steps[source]["raw"].partitioned_by == source
        assert steps[source]["raw"].partition_source == LandingDrops(f"landing/{source}")
        assert sorted(instance.get_dynamic_partitions(source)) == own[source]
        for role in PER_DROP:
            materialized = set(instance.get_materialized_partitions(asset_key_for(f"{source}/{role}")))
            assert materialized == set(own[source]), (source, role, materialized)
        # Dedup of a source's later drop read the index of its own earlier drop, never the other's.
        graph = StepGraph(list(steps[source].values()), prefix, {source: own[source]})
        dedup = graph.resolved(steps[source]["dedup"])
        earlier = [
            json.loads(read_text(join_path(dedup.partition_output_path(drop), INDEX_COMPLETE)))["earlier_drops"]
            for drop in own[source]
        ]
        assert earlier == [[], own[source][:1]], (source, earlier)
        # Its drops table lists its own drops, processed.
        local = [asset_key_for(f"{source}/{role}") for role in PER_DROP]
        rows = drop_rows(instance, prefix, LandingDrops(f"landing/{source}"), local, verify=False)
        assert [(r["drop"], r["status"]) for r in rows] == [(d, "processed") for d in own[source]]

    # Lineage: landing/<source> -> <source>/raw, and only there.
    graph = defs.resolve_asset_graph()
    for source in SOURCES:
        other = next(s for s in SOURCES if s != source)
        parents = graph.get(asset_key_for(f"{source}/raw")).parent_keys
        assert landing_key(source) in parents and landing_key(other) not in parents
        assert graph.get(landing_key(source)).child_keys == {asset_key_for(f"{source}/raw")}
    # Every run of the instance belongs to one source and one of its drops.
    for record in instance.get_run_records():
        tags = record.dagster_run.tags
        source = tags["marin/curation"]
        assert tags["dagster/partition"] in own[source]


def test_two_sources_forced_into_one_partition_set_is_an_error(prefix, dagster_home, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    alpha = _steps("alpha")
    beta = _steps("beta", partition_set="alpha")
    with pytest.raises(ValueError, match="needs a set of its own"):
        build_definitions([Experiment("alpha", list(alpha.values())), Experiment("beta", list(beta.values()))])
