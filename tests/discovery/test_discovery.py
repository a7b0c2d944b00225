"""The experiments folder is the code location: discovery, failure isolation, shared steps, partitions
by default, and command-line runs recorded on the location's assets (real Dagster instance)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.execution import StepGraph
from marin_assets.execution.discovery import MAIN_ONLY_HINT, discover, experiment_entries

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "project"
REPO_ROOT = HERE.parents[1]


@pytest.fixture
def project(monkeypatch, tmp_path):
    """The test project as the code location sees it (its pyproject lists ``experiments/*.py``)."""
    monkeypatch.setenv("MARIN_PROJECT_ROOT", str(PROJECT))
    monkeypatch.delenv("MARIN_EXPERIMENTS", raising=False)
    marker = tmp_path / "main_block_ran"
    monkeypatch.setenv("MAIN_BLOCK_MARKER", str(marker))
    prefix = tmp_path / "prefix"
    monkeypatch.setenv("MARIN_PREFIX", str(prefix))
    # Each test imports the scripts afresh (as a new code-server process would).
    for name in [m for m in sys.modules if m == "experiments" or m.startswith("experiments.")]:
        monkeypatch.delitem(sys.modules, name)
    return {"marker": marker, "prefix": str(prefix)}


def test_scripts_are_found_imported_as_modules_and_a_broken_one_is_an_error(project):
    scripts = {s.name: s for s in discover()}
    assert list(scripts) == ["broken_import", "curation_web", "train_small", "sweep_small"]
    assert "broken on purpose: the dataset config this script needs is missing" in scripts["broken_import"].error
    assert scripts["broken_import"].experiment is None
    train = scripts["train_small"].experiment
    # Module-level steps; the roots are those no other collected step depends on.
    assert [s.name for s in train.steps] == ["evaluation/small"]
    assert not train.job  # no EXPERIMENT: no job per script (each costs a pass over the graph at load)
    assert {s.name for s in scripts["sweep_small"].experiment.steps} == {"checkpoints/small"}
    assert not project["marker"].exists(), "a script's main block ran during discovery"


def test_environment_overrides_the_project_list_and_main_only_scripts_get_a_hint(project, monkeypatch):
    assert experiment_entries() == ["experiments/*.py"]
    monkeypatch.setenv(
        "MARIN_EXPERIMENTS", os.pathsep.join([str(HERE / "main_only"), "marin_assets.experiments.hello_world"])
    )
    scripts = {s.name: s for s in discover()}
    assert sorted(scripts) == ["exp_main_only", "hello_world"]
    assert scripts["exp_main_only"].error == MAIN_ONLY_HINT
    assert [s.name for s in scripts["hello_world"].experiment.steps] == ["hello_world/numbers", "hello_world/stats"]
    assert scripts["hello_world"].experiment.job  # it declares EXPERIMENT: a job hello_world_job


def _location(project):
    import importlib

    import marin_assets.definitions as definitions

    importlib.reload(definitions)  # nothing cached between loads: a reload picks up new scripts
    return definitions.build_definitions()


def test_location_groups_code_versions_shared_steps_and_the_error_group(project):
    defs = _location(project)
    graph = defs.resolve_asset_graph()
    groups: dict[str, set[str]] = {}
    for node in graph.asset_nodes:
        groups.setdefault(node.group_name, set()).add(node.key.to_user_string())
    assert {"train_small", "sweep_small", "curation_web", "broken_import"} <= set(groups)
    assert groups["broken_import"] == {"experiment_errors/broken_import"}
    error_node = graph.get(dg.AssetKey(["experiment_errors", "broken_import"]))
    assert "broken on purpose" in error_node.description and "Traceback" in error_node.description

    # Code versions are the engine's hashes; lr=1e-3 (both scripts) is one asset, lr=3e-3 another.
    sys.path.insert(0, str(PROJECT))
    from experiments import sweep_small, train_small

    engine = StepGraph([train_small.evaluation, *sweep_small.RUNS], project["prefix"])
    models = [engine.resolved(s) for s in sweep_small.RUNS]
    assert models[0] is engine.resolved(train_small.model)
    # One step name with two configs: each key names the script and variable defining it (never a
    # hash, so an edit keeps it).
    model_keys = [
        dg.AssetKey(["checkpoints", f"small_model__{v}"]) for v in ("train_small_model", "sweep_small_RUNS_1")
    ]
    for node in engine.topological():
        key = asset_key_for(node.name) if node.name != "checkpoints/small" else model_keys[models.index(node)]
        assert graph.get(key).code_version == node.hash, key
    # A shared step is one asset, in the group of the script defining it (the training script),
    # whichever script the location lists first.
    assert graph.get(model_keys[0]).group_name == "train_small"
    assert graph.get(asset_key_for("tokenized/small")).group_name == "train_small"
    assert graph.get(model_keys[1]).group_name == "sweep_small"
    assert len({k for k in graph.get_all_asset_keys() if k.path[0] == "checkpoints"}) == 2
    # Every group's cheap unpartitioned steps share one subsettable op (an op per script gave a
    # 100-script location an op input per cross-script dependency); the watched steps (the
    # tokenized data, the sweep's and the training script's models) are ops of their own.
    ops = {a.node_def.name: a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and a.is_executable}
    shared = ops["marin__steps"]
    assert shared.can_subset
    for key in (model_keys[0], model_keys[1], asset_key_for("tokenized/small")):
        own = [op for op in ops.values() if key in op.keys]
        assert len(own) == 1 and set(own[0].keys) == {key} and own[0].op.tags.get("marin/watched") == "true", key
    assert not [name for name in ops if name.startswith(("train_small", "sweep_small"))]

    # The curation script declares no partitions: its landing zone (landing/web) is watched.
    assert {s.name for s in defs.sensors} >= {"landing_sensor_web", "landing_status"}
    assert defs.resolve_job_def("curation_web_drop_job") is not None
    assert graph.get(dg.AssetKey(["landing", "web"])).group_name == "landing"
    assert not project["marker"].exists()


def test_a_new_script_shows_after_reload(project, tmp_path, monkeypatch):
    folder = tmp_path / "exps"
    folder.mkdir()
    (folder / "first.py").write_text((PROJECT / "experiments" / "broken_import.py").read_text())
    monkeypatch.setenv("MARIN_EXPERIMENTS", str(folder / "*.py"))
    before = {n.group_name for n in _location(project).resolve_asset_graph().asset_nodes}
    assert "first" in before
    # Edited (fixed) and a new one added; a reload (a fresh build) shows both.
    (folder / "first.py").write_text((REPO_ROOT / "marin_assets" / "experiments" / "hello_world.py").read_text())
    (folder / "second.py").write_text((PROJECT / "experiments" / "sweep_small.py").read_text())
    sys.path.insert(0, str(PROJECT))
    for name in [m for m in sys.modules if m.startswith("marin_experiments.")]:
        monkeypatch.delitem(sys.modules, name)
    graph = _location(project).resolve_asset_graph()
    keys = {n.key.to_user_string(): n.group_name for n in graph.asset_nodes}
    assert keys["hello_world/stats"] == "first" and "experiment_errors/first" not in keys
    assert "second" in set(keys.values())


def test_partitioned_steps_without_partitions_plan_the_landing_zone_drops(project, capsys):
    from marin_assets.execution import executor_main
    from marin_assets.experiments.curation_pipeline import curation_steps
    from marin_assets.experiments.sample_data import SampleConfig, write_drop

    prefix = project["prefix"]
    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=20), "web")
    steps = curation_steps("landing/web")
    # The repro: no partitions= although the raw step names the landing zone.
    executor_main(steps=[steps["text"]], argv=["--prefix", prefix, "--dry_run"])
    out = capsys.readouterr().out
    assert "curation/raw[drop-001]" in out and "curation/text[drop-001]" in out, out
    assert "0 skip, 0 run" not in out


def test_partitioned_steps_with_no_landing_zone_fail_saying_what_to_pass(project, caplog):
    from marin_assets.execution import ExecutorStep, executor_main, this_output_path
    from tests.discovery.project_steps import PartConfig, write_part

    step = ExecutorStep("p/part", write_part, PartConfig(this_output_path()), partitioned_by="shards")
    with pytest.raises(SystemExit) as exit_info:
        executor_main(steps=[step], argv=["--prefix", project["prefix"], "--dry_run"])
    assert exit_info.value.code == 2
    assert "partitions={'shards': [...keys]}" in caplog.text and "--partitions shards=k1,k2" in caplog.text


def test_command_line_run_and_dagster_materialization_share_assets_status_and_leases(project, tmp_path):
    """A CLI run of a discovered script is recorded on the location's own asset keys; a Dagster
    materialization afterwards finds the same status files (cached), and no other key appears."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": f"{PROJECT}{os.pathsep}{REPO_ROOT}"}
    result = subprocess.run(
        [sys.executable, "-m", "experiments.train_small", "--prefix", project["prefix"]],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["ran"] == 4
    assert "not defined in the code location" not in result.stderr

    defs = _location(project)
    defined = {n.key for n in defs.resolve_asset_graph().asset_nodes}
    instance = dg.DagsterInstance.from_config(str(home))
    recorded = set(instance.get_asset_keys())
    assert recorded <= defined, f"recorded on keys the location does not define: {recorded - defined}"
    eval_key = asset_key_for("evaluation/small")
    (cli_event,) = instance.fetch_materializations(eval_key, limit=10).records
    cli_meta = cli_event.asset_materialization.metadata
    assert cli_meta["marin/action"].value == "ran (executor_main)"
    assert cli_meta["marin/reason"].value == f"computed by command-line run {summary['run_id']}"

    # The same asset materialized through the location's definitions: cached, same output, same key.
    job = defs.resolve_implicit_global_asset_job_def()
    run = job.execute_in_process(instance=instance, asset_selection=[eval_key])  # $MARIN_PREFIX: the prefix
    assert run.success
    events = instance.fetch_materializations(eval_key, limit=10).records
    assert len(events) == 2
    latest = events[0].asset_materialization.metadata
    assert latest["marin/action"].value == "cached"
    assert latest["dagster/uri"].value == cli_meta["dagster/uri"].value
    assert set(instance.get_asset_keys()) == recorded


def test_recording_of_a_step_the_location_does_not_define_tags_it_quietly(project, tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    script = tmp_path / "unlisted.py"
    script.write_text(
        (PROJECT / "experiments" / "train_small.py").read_text().replace("versioned(100)", "versioned(7)")
    )
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": f"{PROJECT}{os.pathsep}{REPO_ROOT}"}
    result = subprocess.run(
        [sys.executable, str(script), "--prefix", project["prefix"]],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    # A script outside the project (a team's folder) is a normal way to run: no console line telling
    # the user to edit the project's pyproject (issue 38); the run's tags still name the steps.
    assert "not defined in the code location" not in result.stderr
    assert "[tool.marin]" not in result.stderr
    instance = dg.DagsterInstance.from_config(str(home))
    (run,) = instance.get_runs()
    assert "documents/small" in run.tags["marin/undefined_steps"]


def test_a_script_dagster_rejects_in_the_shared_ops_becomes_its_groups_error(project, monkeypatch):
    """Should Dagster reject the location's shared ops, each script gets ops of its own and only the
    one at fault becomes its group's error (the rejection is simulated: no real script triggers it)."""
    import marin_assets.definitions as definitions

    real = definitions.assemble_step_ops

    def rejecting(members, name, partitions_defs):
        if name in ("marin", "sweep_small"):
            raise ValueError(f"simulated Dagster rejection of ops {name!r}")
        return real(members, name, partitions_defs)

    monkeypatch.setattr(definitions, "assemble_step_ops", rejecting)
    defs = definitions.build_definitions(scripts=discover())
    graph = defs.resolve_asset_graph()
    ops = {a.node_def.name for a in defs.assets if isinstance(a, dg.AssetsDefinition) and a.is_executable}
    assert {"train_small__steps", "curation_web__steps"} <= ops
    assert not any(name.startswith("marin__") for name in ops)
    error = graph.get(dg.AssetKey(["experiment_errors", "sweep_small"]))
    assert "simulated Dagster rejection of ops 'sweep_small'" in error.description
    assert graph.get(asset_key_for("tokenized/small")).group_name == "train_small"
