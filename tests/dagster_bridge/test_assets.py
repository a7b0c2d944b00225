"""The Dagster bridge: steps as assets on a real on-disk instance, CLI runs recorded, validation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.execution import ExecutorStep, StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.status import read_status
from marin_assets.experiments import hello_world
from marin_resources.dagster_resources import MarinStorageResource, RayResource

REPO = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")


def materialization_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out


def test_each_step_becomes_an_asset_with_hash_code_version_and_deps(prefix):
    steps = hello_world.build_steps()
    assets = build_step_assets(Experiment("hello_world", steps), prefix=prefix)
    graph = StepGraph(steps, prefix)
    # One subsettable op per partition set holds the group's steps as specs (hello_world: one op).
    (op,) = assets
    numbers, stats = (graph.resolved(s) for s in steps)
    key = asset_key_for("hello_world/stats")
    assert op.code_versions_by_key[key] == stats.hash and op.can_subset
    assert set(op.asset_deps[key]) == {asset_key_for("hello_world/numbers")}
    assert op.group_names_by_key[key] == "hello_world"
    spec_meta = op.specs_by_key[key].metadata
    assert spec_meta["dagster/uri"].value == stats.output_path
    # The definition shows the step's own config and its dependencies as name-hash (the full
    # nested version goes with each materialization: it would make a large location's snapshot huge).
    assert spec_meta["marin/version"].data == {
        "name": "hello_world/stats",
        "config": stats.version["config"],
        "dependencies": [f"hello_world/numbers-{numbers.hash}"],
    }
    assert numbers.output_path != stats.output_path


def test_materialize_on_disk_instance_then_second_is_recorded_as_cached(prefix, dagster_home):
    steps = hello_world.build_steps()
    assets = build_step_assets(Experiment("hello_world", steps), prefix=prefix)
    instance = dg.DagsterInstance.get()
    resources = {"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()}
    first = dg.materialize(assets, instance=instance, resources=resources)
    assert first.success
    meta = materialization_metadata(first)
    assert meta["hello_world/stats"]["marin/cached"] is False
    assert meta["hello_world/stats"]["count"] == 1000
    graph = StepGraph(steps, prefix)
    for step in steps:
        assert read_status(graph.resolved(step).output_path).status == "SUCCESS"
    second = dg.materialize(assets, instance=instance, resources=resources)
    meta2 = materialization_metadata(second)
    assert meta2["hello_world/stats"]["marin/cached"] is True
    assert meta2["hello_world/stats"]["mean"] == meta["hello_world/stats"]["mean"]  # metadata survives caching
    # Both runs are in the on-disk instance, with materializations for every asset.
    assert len(instance.get_runs()) == 2
    latest = instance.get_latest_materialization_event(asset_key_for("hello_world/stats"))
    assert latest.run_id == second.run_id


def _env(prefix: str, dagster_home: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "MARIN_PREFIX": prefix, "DAGSTER_HOME": dagster_home}


def test_dagster_cli_materialize_then_api_sees_it_cached(prefix, dagster_home):
    proc = subprocess.run(
        [DAGSTER, "asset", "materialize", "-f", "definitions.py", "--select", "hello_world/numbers,hello_world/stats"],
        cwd=REPO,
        env=_env(prefix, dagster_home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    graph = StepGraph(hello_world.build_steps(), prefix)
    stats_path = graph.topological()[-1].output_path
    assert json.loads(Path(stats_path, "stats.json").read_text())["count"] == 1000
    instance = dg.DagsterInstance.get()
    cli_event = instance.get_latest_materialization_event(asset_key_for("hello_world/stats"))
    assert cli_event.asset_materialization.metadata["marin/cached"].value is False
    assets = build_step_assets(Experiment("hello_world", hello_world.build_steps()), prefix=prefix)
    result = dg.materialize(
        assets,
        instance=instance,
        resources={"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()},
    )
    assert all(m["marin/cached"] for m in materialization_metadata(result).values())


def test_executor_main_runs_are_recorded_in_the_dagster_instance(prefix, dagster_home):
    proc = subprocess.run(
        [sys.executable, "-m", "marin_assets.experiments.hello_world", "--prefix", prefix],
        cwd=REPO,
        env=_env(prefix, dagster_home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    engine_run_id = json.loads(proc.stdout.strip().splitlines()[-1])["run_id"]
    instance = dg.DagsterInstance.get()
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"marin/source": "executor_main"}))
    assert len(runs) == 1 and runs[0].tags["marin/run_id"] == engine_run_id
    assert runs[0].status == dg.DagsterRunStatus.SUCCESS
    event = instance.get_latest_materialization_event(asset_key_for("hello_world/stats"))
    # Computed by the command line, not by the recording run: not marked cached.
    assert event.asset_materialization.metadata["marin/cached"].value is False
    assert event.asset_materialization.metadata["marin/action"].value == "ran (executor_main)"


def test_dagster_definitions_validate_passes(tmp_path, dagster_home):
    proc = subprocess.run(
        [DAGSTER, "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=_env(str(tmp_path / "p"), dagster_home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Validation successful" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("marin_assets.execution", "dagster"),
        ("marin_resources.ray_connect", "dagster"),
        ("marin_resources.ray_head", "dagster"),
        ("marin_resources.accelerators", "dagster"),
    ],
)
def test_layering_engine_and_resources_do_not_import_dagster(module, forbidden):
    code = f"import sys, {module}; print('{forbidden}' in sys.modules, any(m.startswith('marin_assets') for m in sys.modules) and '{module}'.startswith('marin_resources'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_marin_resources_never_imports_marin_assets():
    offenders = [
        str(p.relative_to(REPO))
        for p in (REPO / "marin_resources").rglob("*.py")
        if "marin_assets"
        in "".join(
            line for line in p.read_text().splitlines(keepends=True) if line.lstrip().startswith(("import", "from"))
        )
    ]
    assert offenders == []


def test_partition_mappings_follow_how_a_step_reads_partitions(prefix):
    from marin_assets.dagster_bridge.location_graph import partition_local_steps
    from marin_assets.execution import this_output_path, versioned
    from tests.execution.sample_steps import WriteConfig, write_value

    docs = ExecutorStep("p/docs", write_value, WriteConfig(this_output_path(), versioned(1)), partitioned_by="drops")
    clean = ExecutorStep("p/clean", write_value, WriteConfig(this_output_path(), inputs=[docs]), partitioned_by="drops")
    model = ExecutorStep("p/model", write_value, WriteConfig(this_output_path(), inputs=[clean.partitions()]))
    tokenizer = ExecutorStep(
        "p/tokenizer", write_value, WriteConfig(this_output_path(), inputs=[clean.at_partition("d1")])
    )
    scored = ExecutorStep(
        "p/scored", write_value, WriteConfig(this_output_path(), inputs=[clean, model]), partitioned_by="drops"
    )
    experiment = Experiment("p", [scored, tokenizer])
    resources = {"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()}
    defs = dg.Definitions(assets=build_step_assets(experiment, prefix=prefix), resources=resources)
    asset_graph = defs.resolve_asset_graph()

    def mapping(asset: str, dep: str):
        key, parent = asset_key_for(asset), asset_key_for(dep)
        if parent not in asset_graph.get(key).parent_keys:
            return "no dep"
        return asset_graph.get_partition_mapping(key, parent)

    assert isinstance(mapping("p/model", "p/clean"), dg.AllPartitionMapping)
    specific = mapping("p/tokenizer", "p/clean")
    assert isinstance(specific, dg.SpecificPartitionsPartitionMapping) and list(specific.partition_keys) == ["d1"]
    assert isinstance(mapping("p/scored", "p/clean"), (dg.IdentityPartitionMapping, type(None)))
    graph = StepGraph([scored, tokenizer], prefix, {"drops": ["d1"]})
    assert [n.name for n in partition_local_steps(graph, "drops")] == ["p/docs", "p/clean"]


def test_experiments_sharing_steps_get_one_asset_and_other_versions_stay_distinct(prefix):
    from marin_assets.definitions import build_definitions

    base = hello_world.build_steps()
    extended = hello_world.build_steps()  # same versions: merged into the first experiment's assets
    defs = build_definitions([Experiment("first", base), Experiment("second", extended)])
    keys = [k for a in defs.assets for k in a.keys]
    assert sorted(k.to_user_string() for k in keys) == ["hello_world/numbers", "hello_world/stats"]
    # Same names, other versions (n=7): one asset per version, as a sweep's, keyed by variant
    # (here the experiment reaching it, since no script's variable holds these steps), not by hash.
    other = hello_world.build_steps(n=7)
    defs = build_definitions([Experiment("first", base), Experiment("third", other)])
    expected = {f"hello_world/{role}__{group}_v1" for role in ("numbers", "stats") for group in ("first", "third")}
    by_group = {k.to_user_string(): a.group_names_by_key[k] for a in defs.assets for k in a.keys}
    assert set(by_group) == expected
    assert sorted(by_group.values()) == ["first", "first", "third", "third"]
    assert all(
        by_group[f"hello_world/{role}__{g}_v1"] == g for role in ("numbers", "stats") for g in ("first", "third")
    )
    # Editing the other version (n=7 -> 9) changes its code version, never its key.
    edited = build_definitions([Experiment("first", base), Experiment("third", hello_world.build_steps(n=9))])
    assert {k.to_user_string() for a in edited.assets for k in a.keys} == expected
