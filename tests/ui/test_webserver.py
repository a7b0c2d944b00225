"""The code location as the Dagster webserver serves it: GraphQL over HTTP against a real ``dagster dev``.

No browser here (see ``test_browser.py``): these tests talk to the same GraphQL endpoint the UI
uses, launch real runs through the run queue and daemon, and check the files the engine wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from marin_assets.execution import StepGraph
from marin_assets.experiments import hello_world
from tests.ui.conftest import REPO_ROOT, DagsterDev, metadata_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ASSET_NODES = """
{
  assetNodes {
    assetKey { path }
    groupName
    opVersion
    jobNames
    dependencyKeys { path }
    description
    metadataEntries {
      label ... on PathMetadataEntry { path } ... on TextMetadataEntry { text } ... on UrlMetadataEntry { url }
    }
  }
}
"""

RUNS_BY_TAG = """
query RunsByTag($key: String!, $value: String!) {
  runsOrError(filter: {tags: [{key: $key, value: $value}]}) {
    __typename
    ... on Runs { results { runId status jobName tags { key value } } }
    ... on PythonError { message }
  }
}
"""


def expected_nodes(prefix) -> dict[str, object]:
    """Step name -> resolved step (hash, output path) of the hello_world experiment under ``prefix``."""
    graph = StepGraph(hello_world.build_steps(), str(prefix))
    return {node.name: node for node in graph.topological()}


def read_json(path: str):
    with open(path) as handle:
        return json.load(handle)


def read_status(output_path: str) -> dict:
    return read_json(f"{output_path}/.executor_status")


def test_asset_graph_lists_hello_world_with_step_hashes_as_code_versions(dagster_dev: DagsterDev):
    nodes = expected_nodes(dagster_dev.prefix)
    served = {"/".join(n["assetKey"]["path"]): n for n in dagster_dev.graphql(ASSET_NODES)["assetNodes"]}
    assert {"hello_world/numbers", "hello_world/stats"} <= set(served)
    for name, node in nodes.items():
        asset = served[name]
        assert asset["opVersion"] == node.hash, f"{name}: code version {asset['opVersion']} != step hash {node.hash}"
        assert asset["groupName"] == "hello_world"
        assert "hello_world_job" in asset["jobNames"]
        metadata = {e["label"]: e.get("path", e.get("text", e.get("url"))) for e in asset["metadataEntries"]}
        # The description names the step and its function (plain text: no markdown link); the data
        # browser's page of the output is the definition's marin/browser link.
        assert f"Step {name}, function marin_assets.experiments.hello_world." in asset["description"]
        assert "](" not in asset["description"]
        assert metadata["marin/browser"].endswith(f"/browse/{os.path.relpath(node.output_path, dagster_dev.prefix)}")
        # The definitions were loaded with the fixture's MARIN_PREFIX: the asset points at our output folder.
        assert metadata["dagster/uri"] == node.output_path
    assert served["hello_world/stats"]["dependencyKeys"] == [{"path": ["hello_world", "numbers"]}]
    # Two different steps never share a code version.
    assert served["hello_world/numbers"]["opVersion"] != served["hello_world/stats"]["opVersion"]


def test_launch_run_computes_then_records_cached(dagster_dev: DagsterDev):
    nodes = expected_nodes(dagster_dev.prefix)
    for node in nodes.values():
        assert not os.path.exists(f"{node.output_path}/.executor_status"), "the prefix must start empty for this test"

    first = dagster_dev.wait_for_run(dagster_dev.launch_job("hello_world_job"))
    assert first["status"] == "SUCCESS", dagster_dev.log_tail()
    assert first["jobName"] == "hello_world_job"

    stats_node, numbers_node = nodes["hello_world/stats"], nodes["hello_world/numbers"]
    for node in (numbers_node, stats_node):
        status = read_status(node.output_path)
        assert status["status"] == "SUCCESS", status
    numbers = read_json(f"{numbers_node.output_path}/numbers.json")
    stats = read_json(f"{stats_node.output_path}/stats.json")
    assert len(numbers) == 1000 and stats["count"] == 1000
    assert stats["min"] == min(numbers) and stats["max"] == max(numbers)

    for path in (["hello_world", "numbers"], ["hello_world", "stats"]):
        latest = dagster_dev.materializations(path, limit=1)[0]
        assert latest["runId"] == first["runId"]
        metadata = metadata_of(latest)
        assert metadata["marin/cached"] is False, metadata
        assert metadata["marin/action"] == "ran"
    stats_meta = metadata_of(dagster_dev.materializations(["hello_world", "stats"], limit=1)[0])
    assert stats_meta["dagster/uri"] == stats_node.output_path
    assert stats_meta["marin/hash"] == stats_node.hash
    stats_mtime = os.stat(f"{stats_node.output_path}/stats.json").st_mtime_ns

    second = dagster_dev.wait_for_run(dagster_dev.launch_job("hello_world_job"))
    assert second["status"] == "SUCCESS", dagster_dev.log_tail()
    assert second["runId"] != first["runId"]
    for path in (["hello_world", "numbers"], ["hello_world", "stats"]):
        history = dagster_dev.materializations(path, limit=10)
        assert [m["runId"] for m in history[:2]] == [second["runId"], first["runId"]]
        metadata = metadata_of(history[0])
        assert metadata["marin/cached"] is True, metadata
        assert metadata["marin/action"] == "cached"
    # Cached means not recomputed: the output file is untouched.
    assert os.stat(f"{stats_node.output_path}/stats.json").st_mtime_ns == stats_mtime


def test_command_line_run_shows_in_runs_list(dagster_dev: DagsterDev):
    before = dagster_dev.graphql(RUNS_BY_TAG, {"key": "marin/source", "value": "executor_main"})["runsOrError"]
    assert before["__typename"] == "Runs"
    known = {r["runId"] for r in before["results"]}

    result = subprocess.run(
        [sys.executable, "-m", "marin_assets.experiments.hello_world", "--prefix", str(dagster_dev.prefix)],
        cwd=REPO_ROOT,
        env=dagster_dev.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["prefix"] == str(dagster_dev.prefix)

    runs = dagster_dev.graphql(RUNS_BY_TAG, {"key": "marin/source", "value": "executor_main"})["runsOrError"]
    new = [r for r in runs["results"] if r["runId"] not in known]
    assert len(new) == 1, f"expected one new executor_main run, got {new}"
    run = new[0]
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert tags["marin/source"] == "executor_main"
    assert tags["marin/run_id"] == summary["run_id"]
    assert run["status"] == "SUCCESS"

    # The recorded run materialized both assets, marked as the command line reported them.
    all_cached = summary["ran"] == 0
    assert summary["ran"] + summary["cached"] == 2, summary
    for path in (["hello_world", "numbers"], ["hello_world", "stats"]):
        latest = dagster_dev.materializations(path, limit=1)[0]
        assert latest["runId"] == run["runId"]
        metadata = metadata_of(latest)
        if summary["ran"] in (0, 2):
            assert metadata["marin/cached"] is all_cached, (summary, metadata)
            assert metadata["marin/action"] == ("cached" if all_cached else "ran (executor_main)")
