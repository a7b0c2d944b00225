"""Asset identity across edits: a versioned edit changes a code version, never a key.

A team folder where a sweep script (named to sort first) reuses the training script's model
through ``dataclasses.replace``: keys name the variant (script and variable, not a hash), the
location warns naming both scripts, shared steps sit in the group of the script defining them,
and materializations of one key accumulate across edits (real Dagster instance).
"""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap
from pathlib import Path

import dagster as dg
import pytest

TEAM = '''
"""The team's tiny model."""
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, this_output_path, output_path_of, versioned
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class StageConfig:
    output_path: str
    params: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)


def run_stage(config: StageConfig) -> dict:
    lr = config.params.get("lr", 0.0)
    atomic_write_text(f"{config.output_path}/out.json", "{}")
    return {"final_loss": 1.0 / (1.0 + 100 * lr)}


documents = ExecutorStep(name="documents/team", fn=run_stage, config=StageConfig(this_output_path(), {"n": versioned(DOCS)}))
model = ExecutorStep(
    name="checkpoints/team_tiny",
    fn=run_stage,
    config=StageConfig(this_output_path(), {"lr": versioned(LR)}, [output_path_of(documents)]),
)
'''

SWEEP = '''
"""A sweep over the team's model: reuses its step name with other learning rates."""
import dataclasses

from marin_assets.execution import versioned
from team_exps.z_team import model

RUNS = [
    dataclasses.replace(model, config=dataclasses.replace(model.config, params={"lr": versioned(lr)}))
    for lr in (LRS)
]
'''


def write_project(root: Path, docs: int = 10, lr: float = 1e-3, sweep_lrs: str = "1e-3, 3e-3") -> None:
    (root / "team_exps").mkdir(parents=True, exist_ok=True)
    (root / "team_exps" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[tool.marin]\nexperiments = ["team_exps/*.py"]\n')
    (root / "team_exps" / "z_team.py").write_text(
        textwrap.dedent(TEAM).replace("DOCS", str(docs)).replace("LR", repr(lr))
    )
    if sweep_lrs is not None:
        (root / "team_exps" / "a_sweep.py").write_text(textwrap.dedent(SWEEP).replace("LRS", sweep_lrs))
    elif (root / "team_exps" / "a_sweep.py").exists():
        (root / "team_exps" / "a_sweep.py").unlink()


@pytest.fixture
def team(tmp_path, monkeypatch):
    root = tmp_path / "team"
    monkeypatch.setenv("MARIN_PROJECT_ROOT", str(root))
    monkeypatch.delenv("MARIN_EXPERIMENTS", raising=False)
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m == "team_exps" or m.startswith("team_exps.")]:
        del sys.modules[name]


def load_location(root: Path) -> dg.Definitions:
    """A fresh build of the location, as a code server's reload does (scripts imported anew)."""
    for name in [m for m in sys.modules if m == "team_exps" or m.startswith("team_exps.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    import marin_assets.definitions as definitions

    return definitions.build_definitions()


def keys_and_groups(defs: dg.Definitions) -> dict[str, str]:
    graph = defs.resolve_asset_graph()
    return {n.key.to_user_string(): n.group_name for n in graph.asset_nodes if n.key.path[0] != "landing"}


def test_a_sweep_reusing_a_name_gets_variant_keys_that_survive_edits(team, caplog):
    write_project(team)
    with caplog.at_level(logging.WARNING, logger="marin.definitions"):
        defs = load_location(team)
    nodes = keys_and_groups(defs)
    # The sweep's lr=1e-3 run is the team's own model (one asset); lr=3e-3 is the sweep's.
    assert nodes == {
        "documents/team": "z_team",
        "checkpoints/team_tiny_model__z_team_model": "z_team",
        "checkpoints/team_tiny_model__a_sweep_RUNS_1": "a_sweep",
    }
    warning = [r.getMessage() for r in caplog.records if "several configs" in r.getMessage()]
    assert len(warning) == 1 and "checkpoints/team_tiny" in warning[0]
    assert "a_sweep" in warning[0] and "z_team" in warning[0]

    graph = defs.resolve_asset_graph()
    before = {k: graph.get(dg.AssetKey.from_user_string(k)).code_version for k in nodes}
    # Two edits: the team's learning rate, then the sweep's values: keys stay, code versions move.
    write_project(team, lr=2e-3, sweep_lrs="2e-3, 5e-3")
    edited = load_location(team)
    assert keys_and_groups(edited) == nodes
    graph = edited.resolve_asset_graph()
    after = {k: graph.get(dg.AssetKey.from_user_string(k)).code_version for k in nodes}
    assert after["documents/team"] == before["documents/team"]
    assert after["checkpoints/team_tiny_model__z_team_model"] != before["checkpoints/team_tiny_model__z_team_model"]
    assert after["checkpoints/team_tiny_model__a_sweep_RUNS_1"] != before["checkpoints/team_tiny_model__a_sweep_RUNS_1"]


def test_materializations_of_one_key_accumulate_across_edits(team, dagster_home):
    write_project(team, sweep_lrs=None)  # one config per name: plain keys
    key = dg.AssetKey(["checkpoints", "team_tiny_model"])
    code_versions = []
    with dg.DagsterInstance.get() as instance:
        for lr in (1e-3, 2e-3, 4e-3):  # the original and two edits
            write_project(team, lr=lr, sweep_lrs=None)
            defs = load_location(team)
            assert set(keys_and_groups(defs)) == {"documents/team", key.to_user_string()}
            code_versions.append(defs.resolve_asset_graph().get(key).code_version)
            result = dg.materialize(
                [a for a in defs.assets if isinstance(a, dg.AssetsDefinition) and a.is_executable],
                selection=[key, dg.AssetKey(["documents", "team"])],
                instance=instance,
                resources=defs.resources,
            )
            assert result.success
        records = instance.fetch_materializations(key, limit=10).records
        assert len(records) == 3
        seen = {r.asset_materialization.tags.get("dagster/code_version") for r in records}
        assert seen == set(code_versions) and len(seen) == 3
        losses = sorted(float(r.asset_materialization.metadata["final_loss"].value) for r in records)
        assert len(losses) == 3 and losses[0] < losses[-1]
