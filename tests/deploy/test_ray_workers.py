"""``scripts/local_deploy.sh --ray_workers 2``: the Ray part of the topology with a head and two worker
nodes (started by the topology's own ``start_ray``), and a driver over ``ray://`` as a Dagster run's
step process is one.

* the independent steps of one run (``run_steps``, the engine path a UI run takes: every step a Ray
  task because the driver uses Ray Client) land on both workers -- ``marin/ran_on`` says where;
* the shards of one stage (``core.shard_stage.map_shards`` inside a step on Ray: one Ray task per
  shard) land on both workers -- the step's ``marin/ran_on`` says where (``shard_nodes``), and so do
  the shards themselves.

The same through GraphQL ``launchRun`` on the whole topology (a UI run's steps, a real curation
stage's shards): ``tests/deploy/test_ui_runs_topology.py``.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from marin_resources.deploy import local, ray_nodes, services
from marin_resources.deploy.ray_nodes import ray_port_names
from marin_resources.deploy.services import DeployState

pytestmark = [pytest.mark.slow, pytest.mark.ray]

REPO = Path(__file__).resolve().parents[2]

DRIVER = r"""
import json, sys, time
from dataclasses import dataclass
from marin_assets.execution import ExecutorStep, run_steps, this_output_path, versioned
from marin_assets.execution.status import read_metadata
from marin_resources.accelerators import CpuConfig


@dataclass(frozen=True)
class Job:
    output_path: str
    n: int


def node_of(_shard):
    import time
    import ray
    time.sleep(1.0)  # long enough that the shards run side by side
    return ray.get_runtime_context().get_node_id()


def work(config):
    import time
    from marin_assets.core.shard_stage import map_shards
    time.sleep(2.0)  # the steps overlap: each is placed while the others run
    shard_nodes = map_shards(node_of, [(i,) for i in range(6)]) if config.n == 0 else []
    return {"shards_saw": shard_nodes}


steps = [ExecutorStep(f"spread/step{i}", work, Job(this_output_path(), versioned(i)), resources=CpuConfig())
         for i in range(4)]
report = run_steps(steps, sys.argv[1])
out = []
for outcome in report.outcomes:
    meta = read_metadata(outcome.output_path)
    placement = meta["marin/ran_on"]
    out.append({"node": placement["ray_node_id"], "shards": placement.get("shard_nodes", {}),
                "shards_saw": meta["shards_saw"]})
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture(scope="module")
def two_workers() -> Iterator[dict[str, Any]]:
    base = tempfile.mkdtemp(prefix="mrw-", dir="/tmp")
    state_dir = os.path.join(base, "state")
    names = ("postgres", "gcs", *ray_port_names(2), "code_server", "browser", "webserver", "ray_dashboard")
    ports = {name: services.free_port() for name in names}
    services.read_or_create_secret(os.path.join(state_dir, "secrets", "ray_auth_token"))
    env = local.topology_env(state_dir, ports, "unused-bucket", "unused-password")
    state = DeployState(state_dir=state_dir, ports=ports)
    state.env = {k: env[k] for k in local._SHELL_ENV if k in env}
    try:
        ray_nodes.start_ray(state, env, os.path.join(state_dir, "logs"), workers=2, worker_cpus=2)
        yield {"state": state, "base": base}
    finally:
        local.down(state_dir, quiet=True)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.timeout(900)
def test_steps_and_shards_land_on_both_workers(two_workers):
    state: DeployState = two_workers["state"]
    workers = {n["id"] for n in state.ray_nodes if n["resources"].get("CPU", 0) > 0}
    assert len(workers) == 2 and len(state.ray_nodes) == 3, state.ray_nodes
    assert sorted(s.name for s in state.services) == ["ray-head", "ray-worker", "ray-worker-2"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(state.env)
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, os.path.join(two_workers["base"], "prefix")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"rc {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    result = json.loads(line[len("RESULT ") :])
    step_nodes = {r["node"] for r in result}
    assert step_nodes == workers, (step_nodes, workers)
    # marin/ran_on records where the shards ran: both workers, every shard counted, as they saw it.
    (stage,) = [r for r in result if r["shards"]]
    assert set(stage["shards"]) == workers, (stage, workers)
    assert sum(stage["shards"].values()) == 6, stage
    assert stage["shards"] == dict(collections.Counter(stage["shards_saw"])), stage
