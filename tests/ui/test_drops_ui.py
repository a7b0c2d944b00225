"""Data drops through a real ``dagster dev`` (webserver + daemon), driven over GraphQL as the UI does.

A new user's session: turn the landing sensor on, land three valid drops and one whose checksums
fail (``drop-003``); the daemon's sensor adds partitions for the valid ones and launches one run
per drop (one at a time, as ``scripts/dagster_home.sh`` configures the run queue). Then:

* every drop run succeeds -- the rejected drop never blocks the dedup chain of later drops, and no
  run is launched on inputs that are not there (the classifier is brought along by the first run);
* code versions did not change with the drops (no *Reload definitions*);
* a run that fails (a broken classifier file) is re-executed *from failure* in the UI once the
  cause is fixed, and the FAILED step re-runs -- no ``--force_run_failed`` anywhere.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_status
from marin_assets.experiments import curation
from marin_assets.experiments.curation import PARTITION_SET
from marin_assets.experiments.sample_data import SampleConfig, landing_drop_dir, write_drop
from tests.conftest import LAUNCH_RUN
from tests.ui.conftest import LOCATION, REPOSITORY, DagsterDev, metadata_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(540)]

SENSOR = "landing_sensor_sample_html"
VALID = ["drop-001", "drop-003"]
BAD = "drop-002"
# The curation location with its stages in process (Ray tasks would take minutes per step on 2 busy cores).
DAGSTER_WORKSPACE_YAML = f"""
load_from:
  - python_file:
      relative_path: {Path(__file__).with_name("curation_location.py")}
      location_name: {LOCATION}
      working_directory: {Path(__file__).resolve().parents[2]}
"""
# As scripts/dagster_home.sh sets it up: drop runs one at a time, in the order the sensor asked.
DAGSTER_INSTANCE_YAML = """
run_queue:
  max_concurrent_runs: 4
  tag_concurrency_limits:
    - key: marin/curation
      limit: 1
"""

START_SENSOR = """
mutation Start($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { status } }
    ... on PythonError { message }
  }
}
"""

RUNS = """
query Runs($key: String!, $value: String!) {
  runsOrError(filter: {tags: [{key: $key, value: $value}]}) {
    __typename
    ... on Runs { results { runId status jobName tags { key value } } }
  }
}
"""

CODE_VERSIONS = """
{ assetNodes { assetKey { path } opVersion } }
"""

REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  launchRunReexecution(reexecutionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""


def _code_versions(server: DagsterDev) -> dict[str, str]:
    nodes = server.graphql(CODE_VERSIONS)["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): n["opVersion"] for n in nodes}


def _drop_runs(server: DagsterDev) -> list[dict[str, Any]]:
    result = server.graphql(RUNS, {"key": "marin/curation", "value": curation.SOURCE})["runsOrError"]
    return result["results"]


def _write_bad_checksum_drop(prefix: str, drop_id: str, config: SampleConfig) -> None:
    """A complete drop whose first file no longer matches its sha256 (same size: only the hash tells)."""
    write_drop(prefix, drop_id, config, curation.SOURCE)
    path = os.path.join(landing_drop_dir(prefix, curation.SOURCE, drop_id), "part-00000.jsonl.gz")
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as handle:
        handle.write(bytes(data))


def _wait(predicate, timeout: float, what: str, server: DagsterDev) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{server.log_tail()}")
        time.sleep(1.0)


def test_drops_flow_without_reload_and_a_failed_step_reruns_from_the_ui(dagster_dev: DagsterDev):
    server = dagster_dev
    prefix = str(server.prefix)
    before = _code_versions(server)
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": SENSOR}
    started = server.graphql(START_SENSOR, {"selector": selector})["startSensor"]
    assert started["__typename"] == "Sensor", started

    config = SampleConfig(docs_per_drop=40)
    for drop in VALID:
        write_drop(prefix, drop, config, curation.SOURCE)
    _write_bad_checksum_drop(prefix, BAD, config)

    runs = _wait(lambda: len(_drop_runs(server)) >= len(VALID) and _drop_runs(server), 150, "drop runs", server)
    finished = [server.wait_for_run(r["runId"], timeout=360) for r in runs]
    by_drop = {next(t["value"] for t in r["tags"] if t["key"] == "marin/drop"): r for r in finished}
    assert sorted(by_drop) == VALID  # the checksum-rejected drop got no partition and no run
    assert all(r["status"] == "SUCCESS" for r in finished), [(d, r["status"]) for d, r in by_drop.items()]

    steps = curation.build_steps(use_ray=False)
    graph = StepGraph(list(steps.values()), prefix, {PARTITION_SET: VALID})
    for role in ("raw", "text", "quality", "dedup", "consolidated"):
        for drop in VALID:
            status = read_status(graph.resolved(steps[role]).partition_output_path(drop))
            assert status is not None and status.status == "SUCCESS", (role, drop)
    # drop-003 was deduplicated after drop-001, the rejected drop-002 did not block it.
    dedup = server.materializations(["curation", "dedup"], limit=10)
    dedup_003 = next(m for m in dedup if metadata_of(m).get("dagster/uri", "").endswith("/drop-003"))
    assert metadata_of(dedup_003)["marin/cached"] is False
    # The classifier came along with the first drop's run, once.
    model_mats = server.materializations(["curation", "quality_model"], limit=10)
    assert [metadata_of(m)["marin/cached"] for m in model_mats] == [False]
    # No reload: the code versions are the ones loaded before any drop existed.
    assert _code_versions(server) == before

    # A run fails: the classifier file is broken and drop-003's scores must be recomputed.
    model_bin = os.path.join(graph.resolved(steps["quality_model"]).output_path, "model.bin")
    good_model = Path(model_bin).read_bytes()
    quality_003 = graph.resolved(steps["quality"]).partition_output_path("drop-003")
    os.remove(os.path.join(quality_003, ".executor_status"))
    with open(model_bin, "wb") as handle:
        handle.write(b"not a fastText model")
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "curation_job",
            "assetSelection": [{"path": ["curation", "quality"]}],
        },
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "drop-003"}]},
    }
    launched = server.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    failed = server.wait_for_run(launched["run"]["runId"], timeout=240)
    assert failed["status"] == "FAILURE"
    assert read_status(quality_003).status == "FAILED"

    # Fixed; the user clicks Re-execute -> From failure.
    with open(model_bin, "wb") as handle:
        handle.write(good_model)
    again = server.graphql(REEXECUTE, {"params": {"parentRunId": failed["runId"], "strategy": "FROM_FAILURE"}})[
        "launchRunReexecution"
    ]
    assert again["__typename"] == "LaunchRunSuccess", again
    rerun = server.wait_for_run(again["run"]["runId"], timeout=240)
    assert rerun["status"] == "SUCCESS", server.log_tail()
    assert read_status(quality_003).status == "SUCCESS"
    latest = metadata_of(server.materializations(["curation", "quality"], limit=1)[0])
    assert latest["marin/cached"] is False and latest["marin/reason"] == "previous attempt here is FAILED"
