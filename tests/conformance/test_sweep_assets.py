"""A sweep (one step name, several versions) shows as distinct Dagster assets, keyed by variant, and materializes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import dagster as dg

from marin_assets.definitions import build_definitions
from marin_assets.execution.declarations import Experiment
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from tests.conformance.marin_import import SCRIPTS, map_imports


def load_sweep_module(tmp_path: Path):
    """The sweep script under the import mapping, imported as a module (not run)."""
    path = tmp_path / "sweep_mapped.py"
    path.write_text(map_imports((SCRIPTS / "sweep.py").read_text()))
    spec = importlib.util.spec_from_file_location("sweep_mapped", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sweep_versions_are_distinct_assets(tmp_path, prefix):
    sweep = load_sweep_module(tmp_path)
    defs = build_definitions([Experiment(name="sweep", steps=[*sweep.runs, sweep.summary])])
    keys = {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()}
    train_keys = {k for k in keys if k.startswith("sweep/train")}
    # Each version's key names the variable holding it (not its hash): an edit keeps the keys.
    assert train_keys == {f"sweep/train__sweep_mapped_runs_{i}" for i in range(4)}
    assert {"sweep/data", "sweep/summary"} <= keys  # unique names keep their plain key
    summary_deps = defs.resolve_asset_graph().get(dg.AssetKey(["sweep", "summary"])).parent_keys
    assert {k.to_user_string() for k in summary_deps} == train_keys
    job = defs.resolve_job_def("sweep_job")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(
            instance=instance, resources={"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()}
        )
    assert result.success
    summary = json.loads(Path(prefix, "sweep/summary-704ae7/summary.json").read_text())
    assert sorted(summary) == sorted(f"train-{h}" for h in ("ab0bb1", "df4df3", "e32353", "ba51d0"))
