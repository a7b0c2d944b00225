"""A UI run schedules as ``executor_main`` does on the deployed one-machine topology
(``scripts/local_deploy.sh --ray_workers 2``: Postgres run/event storage, the code server, the
daemon with the QueuedRunCoordinator, the webserver, a Ray head and two worker nodes over
``ray://``), through GraphQL ``launchRun`` on ``__ASSET_JOB`` (what *Materialize* sends):

* four independent sleeping steps run at the same time (their own recorded intervals overlap: the
  run takes about one step's time, not the sum), on both Ray workers (``marin/ran_on``);
* a failing step leaves its sibling materialized (never shown as Failed) and its descendants not
  (DEP_FAILED, no failure of their own recorded), and the run fails naming the failed step with its
  cause first;
* *Re-execute from failure* (``launchRunReexecution``, FROM_FAILURE, once the cause is gone) runs
  only the failed and the not-run steps;
* the shards of one curation stage (the real HTML -> text stage, one Ray task per shard) land on
  both workers, and the stage's ``marin/ran_on`` says where (``shard_nodes``);
* ``restart-code`` while a run is in flight waits for it and refuses (naming it) when it does not
  end in time; ``--force`` interrupts it (its step stopped and its lease given up, the run failed as
  interrupted, its log says so), and Dagster's run retry re-executes it, the step with its real seconds.

One topology for the module, serving a team's experiments repository written by the fixture.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.status import LEASE_FILE, read_status
from marin_assets.execution.storage import exists, join_path
from marin_resources.deploy.services import DeployState
from tests.conftest import (
    REEXECUTE,
    Topology,
    deploy_topology,
    first_failure_description,
    latest_materialization,
    launch_assets,
    materialized_in,
)
from tests.dagster_bridge.run_steps import (
    FAMILY_STATUS_AFTER_BAD_FAILED,
    failing_family,
    independent_steps,
    interval_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
BUCKET = "marin-ui-runs-topology"
NAP_SECONDS = 8.0
NAPS = 4
PAGE_SHARDS = 8
RUN_TIMEOUT_S = 600.0

NAPS_SCRIPT = """
import os

from tests.dagster_bridge.run_steps import independent_steps

NAPS = independent_steps({naps}, float(os.environ["MARIN_TEST_NAP_SECONDS"]))
"""
FAMILY_SCRIPT = """
import os

from tests.dagster_bridge.run_steps import failing_family

FAMILY = failing_family(os.environ["MARIN_TEST_FAIL_FLAG"], float(os.environ["MARIN_TEST_NAP_SECONDS"]))
"""
PAGES_SCRIPT = '''
"""HTML pages in {shards} shards, then the curation pipeline's HTML -> text stage over them."""
from dataclasses import dataclass

from marin_assets.core.io import write_jsonl_gz
from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import join_path
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin_resources.accelerators import CpuConfig


@dataclass(frozen=True)
class PagesConfig:
    output_path: str
    shards: int
    pages_per_shard: int


def write_pages(config: PagesConfig) -> dict:
    for shard in range(config.shards):
        pages = [
            {{"id": f"p{{shard}}-{{i}}", "text": f"<html><body><p>Page {{i}} of shard {{shard}} says something.</p></body></html>",
              "metadata": {{"url": f"https://example.org/{{shard}}/{{i}}"}}}}
            for i in range(config.pages_per_shard)
        ]
        write_jsonl_gz(join_path(config.output_path, f"docs/shard-{{shard:05d}}.jsonl.gz"), pages)
    return {{"shards": config.shards}}


pages = ExecutorStep("documents/ui_pages", write_pages, PagesConfig(this_output_path(), versioned({shards}), versioned(50)))
text = ExecutorStep(
    "curation/ui_pages_text",
    html_to_md,
    SimpleHtmlToMdConfig(output_path_of(pages), this_output_path(), "resiliparse", CURATION_EXTRACTION),
    resources=CpuConfig(num_cpus=1),
)
'''

LATEST_RUN = """
query LatestRun($keys: [AssetKeyInput!]!) {
  assetsLatestInfo(assetKeys: $keys) { assetKey { path } latestRun { id status endTime } }
}
"""
FAILED_TO_MATERIALIZE = """
query Failed($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection { events { __typename
      ... on FailedToMaterializeEvent { assetKey { path } materializationFailureType } } }
  }
}
"""


RESTART_SCRIPT = """
from tests.dagster_bridge.run_steps import independent_steps

SLOW = independent_steps(1, {seconds}, name="restart")
"""
RESTART_NAP_SECONDS = 25.0
RUN_MESSAGES = """
query Messages($runId: ID!) {
  logsForRun(runId: $runId) { ... on EventConnection { events { __typename ... on MessageEvent { message } } } }
}
"""


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _write_project(root: Path) -> None:
    (root / "experiments").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "team-experiments"\nversion = "0"\n\n[tool.marin]\nexperiments = ["experiments/*.py"]\n'
    )
    (root / "experiments" / "__init__.py").write_text("")
    (root / "experiments" / "ui_naps.py").write_text(NAPS_SCRIPT.format(naps=NAPS))
    (root / "experiments" / "ui_family.py").write_text(FAMILY_SCRIPT)
    (root / "experiments" / "ui_pages.py").write_text(PAGES_SCRIPT.format(shards=PAGE_SHARDS))
    (root / "experiments" / "ui_restart.py").write_text(RESTART_SCRIPT.format(seconds=RESTART_NAP_SECONDS))


@pytest.fixture(scope="module")
def deployment() -> Iterator[dict[str, Any]]:
    # Postgres runs as the `postgres` user under root: the state folder must be traversable.
    base = Path(tempfile.mkdtemp(prefix="marin-ui-runs-topo-", dir="/tmp"))
    os.chmod(base, 0o711)
    project = base / "team"
    _write_project(project)
    flag = base / "fail-flag"  # family/bad fails while it exists (read on the Ray workers: same machine)
    state_dir = base / "state"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MARIN_TEST_NAP_SECONDS": str(NAP_SECONDS),
        "MARIN_TEST_FAIL_FLAG": str(flag),
    }
    cmd = [sys.executable, "-m", "marin_resources.deploy.local", "up", "--state_dir", str(state_dir)]
    cmd += ["--webserver_port", "0", "--browser_port", "0", "--ray_dashboard_port", "0", "--bucket", BUCKET]
    cmd += ["--project_root", str(project), "--ray_workers", "2", "--worker_cpus", "2"]
    try:
        start = time.monotonic()
        proc = _run(cmd, env, 600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        print(f"\n[ui-runs-topology] topology up in {time.monotonic() - start:.1f}s")
        state = DeployState.load(str(state_dir))
        assert state is not None
        yield {"topology": deploy_topology(state), "flag": flag, "state_dir": state_dir, "env": env}
    finally:
        _run([sys.executable, "-m", "marin_resources.deploy.local", "down", "--state_dir", str(state_dir)], env, 180)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def topology(deployment, monkeypatch) -> Iterator[Topology]:
    """The module's topology, with this process reading its bucket (gcsfs on the GCS emulator)."""
    import gcsfs

    from tests.gcs_server import point_fsspec_at

    topology: Topology = deployment["topology"]
    emulator = topology.state.env["STORAGE_EMULATOR_HOST"]
    point_fsspec_at(
        types.SimpleNamespace(env={"STORAGE_EMULATOR_HOST": emulator, "FSSPEC_GCS_TOKEN": "anon"}), monkeypatch
    )
    # A gcsfs instance cached by an earlier test would still talk to another emulator.
    gcsfs.GCSFileSystem.clear_instance_cache()
    yield topology
    gcsfs.GCSFileSystem.clear_instance_cache()


def _prefix(topology: Topology) -> str:
    return topology.state.env["MARIN_PREFIX"]


def _workers(topology: Topology) -> set[str]:
    workers = {n["id"] for n in topology.state.ray_nodes if n["resources"].get("CPU", 0) > 0}
    assert len(workers) == 2, topology.state.ray_nodes
    return workers


def _run_to_end(topology: Topology, paths: list[list[str]]) -> tuple[str, dict[str, Any], float]:
    started = time.monotonic()
    run_id = launch_assets(topology, paths)
    run = topology.wait_for_run(run_id, timeout=RUN_TIMEOUT_S)
    return run_id, run, time.monotonic() - started


def _ran_on(topology: Topology, path: list[str]) -> dict[str, Any]:
    latest = latest_materialization(topology, path)
    assert latest is not None, path
    return latest["metadata"]["marin/ran_on"]


def test_independent_steps_of_a_ui_run_run_together_on_both_workers(topology: Topology):
    steps = independent_steps(NAPS, NAP_SECONDS)
    paths = [["nap", f"s{i:02d}"] for i in range(NAPS)]
    run_id, run, wall = _run_to_end(topology, paths)
    assert run["status"] == "SUCCESS", first_failure_description(topology, run_id)
    assert materialized_in(topology, run_id) == {"/".join(p) for p in paths}
    graph = StepGraph(steps, _prefix(topology))
    intervals = [interval_of(graph.resolved(s).output_path) for s in steps]
    # Every step had started before any ended: all four slept at the same time.
    assert max(s for s, _ in intervals) < min(e for _, e in intervals), intervals
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    print(
        f"[ui-runs-topology] {NAPS} x {NAP_SECONDS} s steps: slept within {span:.1f} s "
        f"(sum {NAPS * NAP_SECONDS:.0f} s); {wall:.1f} s from launchRun to SUCCESS"
    )
    # Ray placed them on both worker nodes, and each materialization says where.
    assert {_ran_on(topology, p)["ray_node_id"] for p in paths} == _workers(topology)


def test_a_failure_stops_only_descendants_then_reexecute_from_failure_runs_what_is_left(topology, deployment):
    flag: Path = deployment["flag"]
    family = failing_family(str(flag), NAP_SECONDS)
    paths = [["family", name] for name in family]
    graph = StepGraph(list(family.values()), _prefix(topology))
    flag.write_text("fail")
    try:
        run_id, run, _ = _run_to_end(topology, paths)
        assert run["status"] == "FAILURE", run
        assert materialized_in(topology, run_id) == {"family/root", "family/sibling"}
        statuses = {n: read_status(graph.resolved(s).output_path).status for n, s in family.items()}
        assert statuses == FAMILY_STATUS_AFTER_BAD_FAILED
        # The run's failure names the failed step, its cause first.
        first_line = first_failure_description(topology, run_id).splitlines()[0]
        assert first_line.startswith("ValueError: planned failure of bad") and "family/bad" in first_line, first_line
        # No asset of the run is recorded as failed to materialize with a failure of its own.
        events = topology.graphql(FAILED_TO_MATERIALIZE, {"runId": run_id})["logsForRun"]["events"]
        failed = {
            "/".join(e["assetKey"]["path"]): e["materializationFailureType"]
            for e in events
            if e["__typename"] == "FailedToMaterializeEvent"
        }
        assert all(failed.get(f"family/{n}") != "FAILED" for n in ("root", "sibling", "child", "grandchild")), failed
        shown_failed = {n: _shown_as_failed(topology, ["family", n]) for n in family}
        print(f"[ui-runs-topology] shown as Failed after the failed run: {shown_failed}; failure events {failed}")
        # The UI's asset status: the failed step is Failed; root and sibling, materialized by the
        # failed run, are not.
        assert shown_failed["bad"] and not shown_failed["root"] and not shown_failed["sibling"], shown_failed
        for name in ("child", "grandchild"):
            assert latest_materialization(topology, ["family", name]) is None, name
        first_root = latest_materialization(topology, ["family", "root"])
        root_interval = interval_of(graph.resolved(family["root"]).output_path)
    finally:
        flag.unlink(missing_ok=True)

    again = topology.graphql(REEXECUTE, {"params": {"parentRunId": run_id, "strategy": "FROM_FAILURE"}})
    again = again["launchRunReexecution"]
    assert again["__typename"] == "LaunchRunSuccess", again
    rerun_id = again["run"]["runId"]
    rerun = topology.wait_for_run(rerun_id, timeout=RUN_TIMEOUT_S)
    assert rerun["status"] == "SUCCESS", first_failure_description(topology, rerun_id)
    # Only what was left: the failed step and the two that did not run; root and sibling stay.
    assert materialized_in(topology, rerun_id) == {"family/bad", "family/child", "family/grandchild"}
    assert latest_materialization(topology, ["family", "root"])["runId"] == first_root["runId"] == run_id
    assert interval_of(graph.resolved(family["root"]).output_path) == root_interval  # not run again
    assert {n: read_status(graph.resolved(s).output_path).status for n, s in family.items()} == dict.fromkeys(
        family, "SUCCESS"
    )


def _shown_as_failed(topology: Topology, path: list[str]) -> bool:
    """Whether the asset graph and catalog show the asset as Failed: the UI's own rule
    (``shouldDisplayRunFailure`` in ``ui-core/src/asset-graph/Utils.tsx``): the latest run that planned
    it failed, and it has no materialization from that run or newer."""
    (info,) = topology.graphql(LATEST_RUN, {"keys": [{"path": path}]})["assetsLatestInfo"]
    run = info["latestRun"]
    if run is None or run["status"] != "FAILURE":
        return False
    latest = latest_materialization(topology, path)
    if latest is None:
        return True
    return latest["runId"] != run["id"] and float(latest["timestamp"]) <= float(run["endTime"]) * 1000


def test_a_curation_stage_s_shards_land_on_both_workers_and_ran_on_says_where(topology: Topology):
    paths = [["documents", "ui_pages"], ["curation", "ui_pages_text"]]
    run_id, run, _ = _run_to_end(topology, paths)
    assert run["status"] == "SUCCESS", first_failure_description(topology, run_id)
    latest = latest_materialization(topology, ["curation", "ui_pages_text"])
    assert latest is not None and latest["runId"] == run_id
    metadata = latest["metadata"]
    assert metadata["shards"] == PAGE_SHARDS and metadata["pool"] == "ray", metadata
    placement = metadata["marin/ran_on"]
    print(f"[ui-runs-topology] stage on {placement['ray_node_id'][:8]}, shards {placement.get('shard_nodes')}")
    # The stage ran on a worker; its shard tasks ran on both, every shard counted.
    workers = _workers(topology)
    assert placement["ray_node_id"] in workers
    assert set(placement["shard_nodes"]) == workers, placement
    assert sum(placement["shard_nodes"].values()) == PAGE_SHARDS, placement


def test_restart_code_waits_for_a_run_then_force_interrupts_it_and_says_so(topology, deployment):
    path = ["restart", "s00"]
    run_id = launch_assets(topology, [path])
    step = StepGraph(independent_steps(1, RESTART_NAP_SECONDS, name="restart"), _prefix(topology)).topological()[0]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (status := read_status(step.output_path)) is None or status.status != "RUNNING":
        assert time.monotonic() < deadline, f"the step never started: {topology.run(run_id)}"
        time.sleep(0.5)
    restart = [sys.executable, "-m", "marin_resources.deploy.local", "restart-code"]
    restart += ["--state_dir", str(deployment["state_dir"])]
    refused = _run([*restart, "--wait_s", "1"], deployment["env"], 300)
    assert refused.returncode == 1 and run_id in refused.stderr, refused.stdout + refused.stderr
    assert topology.run(run_id)["status"] == "STARTED"  # waiting and refusing left it running
    forced = _run([*restart, "--wait_s", "0", "--force"], deployment["env"], 600)
    assert forced.returncode == 0, forced.stdout[-3000:] + forced.stderr[-3000:]
    interrupted = topology.wait_for_run(run_id, timeout=RUN_TIMEOUT_S)
    assert interrupted["status"] == "FAILURE", interrupted
    messages = [e["message"] for e in topology.graphql(RUN_MESSAGES, {"runId": run_id})["logsForRun"]["events"]]
    assert any("interrupted" in m.lower() for m in messages), messages[-10:]

    # The step's Ray task is not left running unobserved: the interrupted op gave up the step's lease,
    # which stops its Ray task, and said so in the run's log; nothing was recorded for the step.
    assert any("stopped 1 running step(s), their Ray tasks cancelled" in m for m in messages), messages[-10:]
    lease = join_path(step.output_path, LEASE_FILE)
    while exists(lease):
        assert time.monotonic() < deadline, f"the interrupted step's lease is still there: {lease}"
        time.sleep(0.5)
    # Re-executed from failure once the new server is up: by Dagster's run retry (the instance's
    # ``run_retries``; an interruption is no step failure) or, where the daemon tried while the
    # server was down and gave up, by restart-code itself -- once either way. The step runs again
    # there, with its real seconds.
    (retry_id,) = re.findall(rf"^run {run_id}: interrupted; .* as (\S+)$", forced.stdout, re.M)
    retry = topology.wait_for_run(retry_id, timeout=RUN_TIMEOUT_S)
    assert retry["status"] == "SUCCESS", first_failure_description(topology, retry_id)
    latest = latest_materialization(topology, path)
    assert latest is not None and latest["runId"] == retry_id, latest
    metadata = latest["metadata"]
    if metadata["marin/action"] == "ran":
        assert metadata["marin/seconds"] >= RESTART_NAP_SECONDS, metadata
    else:  # finished by the interrupted run after all: its seconds and its run, never 0 s
        assert metadata.get("marin/computed_by_run") == run_id and metadata["marin/seconds"] > 0, metadata
    assert read_status(step.output_path).status == "SUCCESS"
    tags = {t["key"]: t["value"] for t in topology.run(run_id)["tags"]}
    assert tags.get("dagster/auto_retry_run_id", retry_id) == retry_id, tags  # one retry, not two
