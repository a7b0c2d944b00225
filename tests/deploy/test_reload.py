"""The research loop on the production topology (``scripts/local_deploy.sh``): edit, reload, re-materialize.

A team's experiments repository (``--project_root``) with a four-step training script and a script
that fails on import is served by the topology's code server (``dagster code-server start``). The
script's last asset is materialized through the daemon and the Ray worker, bringing its three inputs
along; then a ``versioned(...)``
value of the model step is edited, a new script is added and the broken one fixed, and
``local_deploy.sh reload`` (GraphQL ``reloadRepositoryLocation``, what *Reload definitions* sends)
serves, within seconds, the new code version on the same asset key with the stale marker, the new
script's asset and the fixed script's asset. A run launched afterwards for every asset of the
script recomputes only the edited step and its descendant, with the new code; ``restart-code``
restarts the code server alone.

Links that survive a restart of Ray: ``tests/deploy/test_ray_links_restart.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_resources.deploy import services
from marin_resources.deploy.services import DeployState
from tests.conftest import LAUNCH_RUN, Topology, deploy_topology
from tests.ui.conftest import LOCATION, REPOSITORY

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUCKET = "marin-reload-test"
STEPS = ("documents/team_docs", "tokenized/team_tokens", "checkpoints/team_model", "evaluation/team_eval")
EDITED = "checkpoints/team_model"

TRAIN_SCRIPT = '''
"""A team's training script: documents -> tokenized -> model -> evaluation, tiny JSON steps."""
import json
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class StageConfig:
    output_path: str
    stage: str
    params: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)


def run_stage(config: StageConfig) -> dict:
    atomic_write_text(f"{{config.output_path}}/out.json", json.dumps({{"stage": config.stage, "params": config.params}}))
    return {{"stage": config.stage}}


documents = ExecutorStep(name="documents/team_docs", fn=run_stage,
                         config=StageConfig(this_output_path(), "documents", {{"count": versioned(10)}}))
tokenized = ExecutorStep(name="tokenized/team_tokens", fn=run_stage,
                         config=StageConfig(this_output_path(), "tokenize", {{"vocab": versioned(64)}},
                                            [output_path_of(documents)]))
model = ExecutorStep(name="checkpoints/team_model", fn=run_stage,
                     config=StageConfig(this_output_path(), "train", {{"lr": versioned({lr})}},
                                        [output_path_of(tokenized)]))
evaluation = ExecutorStep(name="evaluation/team_eval", fn=run_stage,
                          config=StageConfig(this_output_path(), "eval", {{"tasks": versioned(["ppl"])}},
                                             [output_path_of(model)]))
'''

NEW_SCRIPT = '''
"""A script added while the topology runs."""
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from experiments.team_train import StageConfig, run_stage

probe = ExecutorStep(name="evaluation/team_probe", fn=run_stage,
                     config=StageConfig(this_output_path(), "probe", {"n": versioned(1)}))
'''

BROKEN_SCRIPT = 'raise RuntimeError("team_broken is broken on purpose")\n'
FIXED_SCRIPT = '''
"""The broken script, fixed."""
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from experiments.team_train import StageConfig, run_stage

fixed = ExecutorStep(name="evaluation/team_fixed", fn=run_stage,
                     config=StageConfig(this_output_path(), "fixed", {"n": versioned(2)}))
'''

RUN_ERRORS = """
query Errors($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection { events { __typename
      ... on ExecutionStepFailureEvent { stepKey error { message causes { message } } }
      ... on RunFailureEvent { message } } }
  }
}
"""
ASSET_NODES = "{ assetNodes { assetKey { path } groupName opVersion staleStatus } }"
MATERIALIZATIONS = """
query M($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    ... on Asset { assetMaterializations(limit: 1) { runId metadataEntries { label
      ... on TextMetadataEntry { text } ... on UrlMetadataEntry { url } ... on JsonMetadataEntry { jsonString } } } }
  }
}
"""


def _key(name: str) -> str:
    return asset_key_for(name).to_user_string()


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _write_project(root: Path, lr: str) -> None:
    (root / "experiments").mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "team-experiments"\nversion = "0"\n\n[tool.marin]\nexperiments = ["experiments/*.py"]\n'
    )
    (root / "experiments" / "__init__.py").write_text("")
    (root / "experiments" / "team_train.py").write_text(TRAIN_SCRIPT.format(lr=lr))
    (root / "experiments" / "team_broken.py").write_text(BROKEN_SCRIPT)


def _up(state_dir: Path, project: Path, dashboard_port: int) -> DeployState:
    cmd = [sys.executable, "-m", "marin_resources.deploy.local", "up", "--state_dir", str(state_dir)]
    cmd += ["--webserver_port", "0", "--browser_port", "0", "--bucket", BUCKET, "--worker_cpus", "4"]
    cmd += ["--project_root", str(project), "--ray_dashboard_port", str(dashboard_port)]
    start = time.monotonic()
    proc = _run(cmd, {**os.environ, "PYTHONPATH": str(REPO)}, 600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"\n[reload] topology up in {time.monotonic() - start:.1f}s")
    state = DeployState.load(str(state_dir))
    assert state is not None
    return state


@pytest.fixture(scope="module")
def deployment():
    # Postgres runs as the `postgres` user under root: the state folder must be traversable.
    base = Path(tempfile.mkdtemp(prefix="marin-reload-test-", dir="/tmp"))
    os.chmod(base, 0o711)
    project = base / "team"
    _write_project(project, "0.001")
    state_dir = base / "state"
    info: dict[str, Any] = {"base": base, "project": project, "state_dir": state_dir}
    info["dashboard_port"] = services.free_port()
    try:
        info["topology"] = deploy_topology(_up(state_dir, project, info["dashboard_port"]))
        yield info
    finally:
        _run([sys.executable, "-m", "marin_resources.deploy.local", "down", "--state_dir", str(state_dir)], {}, 180)
        shutil.rmtree(base, ignore_errors=True)


def _nodes(topology: Topology) -> dict[str, dict[str, Any]]:
    return {"/".join(n["assetKey"]["path"]): n for n in topology.graphql(ASSET_NODES)["assetNodes"]}


def _materialize(topology: Topology, names: tuple[str, ...], timeout: float = 600) -> str:
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": _key(n).split("/")} for n in names],
        },
        "runConfigData": {},
    }
    launched = topology.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run = topology.wait_for_run(launched["run"]["runId"], timeout=timeout)
    if run["status"] != "SUCCESS":
        events = topology.graphql(RUN_ERRORS, {"runId": run["runId"]})["logsForRun"]["events"]
        pytest.fail(f"run {run['runId']} {run['status']}: {[e for e in events if len(e) > 1]}")
    return run["runId"]


def _latest(topology: Topology, name: str) -> dict[str, Any]:
    asset = topology.graphql(MATERIALIZATIONS, {"key": {"path": _key(name).split("/")}})["assetOrError"]
    (materialization,) = asset["assetMaterializations"]
    values = {}
    for entry in materialization["metadataEntries"]:
        values[entry["label"]] = entry.get("text") or entry.get("url") or entry.get("jsonString")
    return {"runId": materialization["runId"], **values}


def _local(state: DeployState, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "marin_resources.deploy.local", *args, "--state_dir", state.state_dir]
    proc = _run(cmd, {**os.environ, "PYTHONPATH": str(REPO)}, timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.timeout(1500)
def test_edit_reload_new_code_version_same_key_stale_then_only_the_edit_recomputes(deployment):
    topology: Topology = deployment["topology"]
    project: Path = deployment["project"]
    nodes = _nodes(topology)
    assert {nodes[_key(n)]["groupName"] for n in STEPS} == {"team_train"}
    assert nodes["experiment_errors/team_broken"]["groupName"] == "team_broken"
    code = next(s for s in topology.state.services if s.name == "code-server")
    assert code.command[1:3] == ["code-server", "start"]  # not `api grpc`: that one cannot reload

    # The first run selects the evaluation alone: its three inputs are brought along (as a schedule's
    # nightly run does), and each must still be recorded with its code and data version, or the edit
    # below would leave the brought-along model FRESH (issue 36's staleness reproduction).
    first_run = _materialize(topology, ("evaluation/team_eval",))
    before = _nodes(topology)
    assert all(before[_key(n)]["staleStatus"] == "FRESH" for n in STEPS), before
    first = {n: _latest(topology, n) for n in STEPS}
    assert all(m["marin/code_version"] == before[_key(n)]["opVersion"] for n, m in first.items()), first
    assert all(m["runId"] == first_run for m in first.values()), first
    assert {n: m["marin/action"] for n, m in first.items()} == {
        **{n: "ran (input of evaluation/team_eval)" for n in STEPS[:-1]},
        "evaluation/team_eval": "ran",
    }
    # The step ran on the Ray worker, importing the team's script there (PYTHONPATH).
    assert all(json.loads(m["marin/ran_on"])["ray_node_id"] for m in first.values())

    # Edit a versioned value, add a script, fix the broken one; then Reload definitions.
    (project / "experiments" / "team_train.py").write_text(TRAIN_SCRIPT.format(lr="0.002"))
    (project / "experiments" / "team_new.py").write_text(NEW_SCRIPT)
    (project / "experiments" / "team_broken.py").write_text(FIXED_SCRIPT)
    edited_at = time.monotonic()
    proc = _local(topology.state, "reload")
    after = _nodes(topology)
    while after[_key(EDITED)]["opVersion"] == before[_key(EDITED)]["opVersion"] and time.monotonic() - edited_at < 60:
        time.sleep(0.5)
        after = _nodes(topology)
    reload_s = time.monotonic() - edited_at
    print(f"[reload] edit -> new code version served in {reload_s:.1f}s ({proc.stdout.strip()})")
    assert reload_s < 60, reload_s
    # Same keys; the edited step and its descendant have new code versions and are stale.
    for name in STEPS:
        assert _key(name) in after, name
    changed = {n for n in STEPS if after[_key(n)]["opVersion"] != before[_key(n)]["opVersion"]}
    assert changed == {EDITED, "evaluation/team_eval"}, changed
    assert after[_key(EDITED)]["staleStatus"] == "STALE"
    assert after[_key("documents/team_docs")]["staleStatus"] == "FRESH"
    # The new script and the fixed one are served; the error asset is gone.
    assert after[_key("evaluation/team_probe")]["groupName"] == "team_new"
    assert after[_key("evaluation/team_fixed")]["groupName"] == "team_broken"
    assert "experiment_errors/team_broken" not in after

    # A run of every asset of the script: only the edited step and its descendant recompute.
    second_run = _materialize(topology, STEPS)
    second = {n: _latest(topology, n) for n in STEPS}
    actions = {n: m["marin/action"] for n, m in second.items()}
    assert actions[EDITED] == "ran" and actions["evaluation/team_eval"] == "ran", actions
    assert actions["documents/team_docs"] != "ran" and actions["tokenized/team_tokens"] != "ran", actions
    assert second[EDITED]["runId"] == second_run
    # ... with the new code: the model's output records the edited value, under the new code version.
    assert second[EDITED]["marin/code_version"] == after[_key(EDITED)]["opVersion"]
    assert all(_nodes(topology)[_key(n)]["staleStatus"] == "FRESH" for n in STEPS)
    # The new and the fixed script materialize too.
    _materialize(topology, ("evaluation/team_probe", "evaluation/team_fixed"))

    # restart-code: the code server alone, on its port; the location loads again.
    old_pid = code.pid
    proc = _local(topology.state, "restart-code")
    print(f"[reload] {proc.stdout.strip()}")
    state = DeployState.load(topology.state.state_dir)
    restarted = next(s for s in state.services if s.name == "code-server")
    assert restarted.pid != old_pid and restarted.port == code.port
    assert services.group_processes(restarted.pid) and not services.group_processes(old_pid)
    assert _nodes(topology)[_key(EDITED)]["opVersion"] == after[_key(EDITED)]["opVersion"]
    topology.state = state
