"""The production topology on one machine (``scripts/local_deploy.sh``), driven as a user would.

One topology for the module: Postgres, fake-gcs-server, a Ray head + worker node reached over
``ray://`` (the worker also advertises a GPU and a v4-8 TPU head as labels, so accelerator steps
can be placed), the user-code gRPC server, dagster-webserver and dagster-daemon. The tests, in order:

1. every kind of step (plain, ``@ray.remote``, CPU, GPU, TPU configs) runs over ``ray://`` on the
   worker node, and records where;
2. the quickstart (test size) runs from the command line into ``gs://``, recorded in Postgres; its
   heavy steps (curation shards, tokenize, train, eval) ran on the worker node, not in the driver;
3. an asset is materialized from the UI in headless Chromium (a real run through the daemon's queue);
4. a new 400-document drop lands in the ``gs://`` landing zone: the sensor adds the partition, the
   drop run starts and the drop's assets follow, up to its consolidated documents (timings printed);
   the consolidated asset's ``marin/browser`` link opens the topology's data browser on those
   documents (folder, then a page of records from the bucket);
5. lineage from the evaluation to the raw drop, in the browser and over GraphQL;
6. Postgres and the bucket hold what the workflows did; ``--down`` leaves no process behind.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from marin_assets.experiments import curation
from marin_resources.deploy.services import DeployState
from tests.ui.conftest import LOCATION, REPOSITORY, DagsterDev
from tests.ui.test_browser import _missing_browser_parts, click_button, open_page, screenshot, wait_for_text

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUCKET = "marin-deploy-test"
PREFIX = f"gs://{BUCKET}/marin"
WORKER_RESOURCES = {"TPU": 4, "TPU-v4-8-head": 1}
NEW_DROP = "drop-003"
HEAVY_ASSETS = {  # asset key -> a partition to look at (None: unpartitioned)
    "curation/raw": "drop-001",
    "curation/text": "drop-001",
    "curation/dedup": "drop-001",
    "tokenized/quickstart_test_tokens": "drop-001",
    "checkpoints/quickstart_test_model": None,
    "evaluation/quickstart_test_eval": None,
}
MATERIALIZATIONS = """
query M($key: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations(partitions: $partitions, limit: 1) {
        runId partition
        metadataEntries { label ... on JsonMetadataEntry { jsonString } ... on TextMetadataEntry { text }
                          ... on BoolMetadataEntry { boolValue } ... on PathMetadataEntry { path }
                          ... on UrlMetadataEntry { url } }
      }
    }
  }
}
"""
START_SENSOR = """
mutation Start($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) { __typename ... on Sensor { sensorState { status } } ... on PythonError { message } }
}
"""
RUNS_WITH_TAG = """
query Runs($key: String!, $value: String!) {
  runsOrError(filter: {tags: [{key: $key, value: $value}]}) {
    ... on Runs { results { runId status jobName startTime endTime creationTime } }
  }
}
"""
SENSORS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { sensors { name } } } } }"
ASSET_DEPS = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"


class Topology(DagsterDev):
    """The started topology: its state, environment and webserver."""

    state: DeployState


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def _client_env(state: DeployState) -> dict[str, str]:
    """The environment `local_deploy.sh env` gives a shell."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MARIN_PREFIX", "DAGSTER_HOME")}
    env.update(state.env)
    with open(os.path.join(state.state_dir, "secrets", "postgres_password")) as handle:
        env["DAGSTER_PG_PASSWORD"] = handle.read().strip()
    env["PYTHONPATH"] = str(REPO)
    return env


@pytest.fixture(scope="module")
def topology() -> Topology:
    # Postgres runs as the `postgres` user when the tests run as root: its folders must be reachable
    # (pytest's tmp dirs are 0700), so the state lives in a traversable folder of its own.
    base = Path(tempfile.mkdtemp(prefix="marin-deploy-test-", dir="/tmp"))
    os.chmod(base, 0o711)
    state_dir = base / "state"
    env = {**os.environ, "MARIN_QUICKSTART_SIZE": "test", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "marin_resources.deploy.local", "up", "--state_dir", str(state_dir)]
    cmd += ["--webserver_port", "0", "--bucket", BUCKET, "--worker_gpus", "1"]
    cmd += ["--worker_resources", json.dumps(WORKER_RESOURCES)]
    start = time.monotonic()
    proc = _run(cmd, env, timeout=600)
    up_s = time.monotonic() - start
    state = DeployState.load(str(state_dir))
    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        print(f"\n[deploy] topology up in {up_s:.1f}s\n{proc.stdout}")
        webserver = next(s for s in state.services if s.name == "webserver")
        server = Topology(
            url=f"http://127.0.0.1:{state.ports['webserver']}",
            dagster_home=Path(state.env["DAGSTER_HOME"]),
            prefix=Path("/nonexistent"),
            env=_client_env(state),
            log_path=Path(webserver.log),
            process=None,
        )
        server.state = state
        yield server
    finally:
        _run([sys.executable, "-m", "marin_resources.deploy.local", "down", "--state_dir", str(state_dir)], env, 120)
        shutil.rmtree(base, ignore_errors=True)


def _worker_node(topology: Topology) -> str:
    (worker,) = [n for n in topology.state.ray_nodes if n["resources"].get("CPU", 0) > 0]
    return worker["id"]


def _latest(topology: Topology, key: str, partition: str | None = None) -> dict[str, Any] | None:
    variables = {"key": {"path": key.split("/")}, "partitions": [partition] if partition else None}
    result = topology.graphql(MATERIALIZATIONS, variables)["assetOrError"]
    assert result["__typename"] == "Asset", (key, result)
    found = result["assetMaterializations"]
    return found[0] if found else None


def _ran_on(materialization: dict[str, Any]) -> dict[str, Any]:
    for entry in materialization["metadataEntries"]:
        if entry["label"] == "marin/ran_on":
            return json.loads(entry["jsonString"])
    raise AssertionError(f"no marin/ran_on in {materialization}")


def _wait(predicate, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1.0)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        assert response.status == 200, url
        return response.read().decode()


def _browser_links(page: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'href="(/browse/[^"]+)"', page)]


def _open_browser_link(topology: Topology, materialization: dict[str, Any], partition: str) -> None:
    """Open the materialization's `marin/browser` link, then one page of records below it."""
    (link,) = [e["url"] for e in materialization["metadataEntries"] if e["label"] == "marin/browser"]
    base = topology.state.env["MARIN_BROWSER_URL"]
    assert link.startswith(f"{base}/browse/") and link.endswith(f"/{partition}"), link
    folder = _get(link)
    # The output's summary (status, partition) read from the bucket, and its files.
    assert 'id="output"' in folder and partition in folder and 'id="listing"' in folder, folder[:2000]
    docs = [h for h in _browser_links(folder) if h.rstrip("/").endswith("/docs")]
    assert docs, folder[:2000]
    shards = [h for h in _browser_links(_get(base + docs[0])) if re.search(r"\.(jsonl|parquet)[^/]*$", h)]
    assert shards, docs
    records = _get(base + shards[0])
    assert 'id="records"' in records and "records 0" in records, records[:2000]


def _postgres(topology: Topology):
    import psycopg2

    return psycopg2.connect(
        host="127.0.0.1",
        port=topology.state.ports["postgres"],
        user="dagster",
        password=topology.env["DAGSTER_PG_PASSWORD"],
        dbname="dagster",
    )


@pytest.mark.timeout(300)
def test_every_kind_of_step_runs_over_ray_client_on_the_worker(topology: Topology):
    proc = _run([sys.executable, "-m", "tests.deploy.ray_client_steps", f"{PREFIX}/ray_client"], topology.env, 280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    metadata = json.loads(proc.stdout.strip().splitlines()[-1])
    worker = _worker_node(topology)
    assert sorted(m["kind"] for m in metadata.values()) == ["cpu", "gpu", "plain", "remote", "tpu"]
    for name, meta in metadata.items():
        placement = meta["marin/ran_on"]
        assert placement["ray_node_id"] == worker, name
        # Not the driver's process: a Ray worker process on the worker node.
        assert meta["pid"] == placement["pid"]
        # Links to the Ray job and the task's worker log on the topology's dashboard.
        dashboard = topology.state.env["MARIN_RAY_DASHBOARD_URL"]
        assert meta["marin/ray_job"]["value"] == f"{dashboard}/#/jobs/{placement['ray_job_id']}", name
        assert placement["ray_worker_log"] in meta["marin/ray_logs"]["value"], name
    by_kind = {m["kind"]: m["marin/ran_on"]["resources"] for m in metadata.values()}
    assert by_kind["cpu"]["CPU"] == 2.0
    assert by_kind["gpu"]["GPU"] == 1.0
    assert by_kind["tpu"]["TPU"] == 4.0 and by_kind["tpu"]["TPU-v4-8-head"] == 1.0


@pytest.mark.timeout(1200)
def test_quickstart_on_the_cluster_recorded_in_postgres(topology: Topology):
    cmd = [sys.executable, "-m", "marin_assets.experiments.quickstart", "--size", "test"]
    cmd += ["--sample_docs", "120", "--sample_drops", "2"]
    start = time.monotonic()
    proc = _run(cmd, topology.env, 1150)
    print(f"\n[deploy] quickstart (test size) on the topology: {time.monotonic() - start:.1f}s")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    worker = _worker_node(topology)
    for key, partition in HEAVY_ASSETS.items():
        materialization = _latest(topology, key, partition)
        assert materialization is not None, key
        placement = _ran_on(materialization)
        assert placement["ray_node_id"] == worker, (key, placement)
        assert placement["resources"].get("CPU", 0) >= 1, (key, placement)
    # Recorded in Postgres as runs tagged by the command line.
    with _postgres(topology) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM run_tags WHERE key = 'marin/source' AND value = 'executor_main'")
        assert cur.fetchone()[0] >= 2
        cur.execute(
            "SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION' AND asset_key LIKE %s",
            ('%"evaluation", "quickstart_test_eval"%',),
        )
        assert cur.fetchone()[0] >= 1


@pytest.mark.timeout(300)
def test_materialize_an_asset_from_the_ui(topology: Topology, tmp_path):
    missing = _missing_browser_parts()
    if missing:
        pytest.skip(f"needs {', '.join(missing)}; run `bash scripts/install_browser.sh`")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.ui.test_browser import CHROME_FLAGS, CHROMEDRIVER, _chromium_binary

    options = webdriver.ChromeOptions()
    options.binary_location = _chromium_binary()
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get(topology.url + "/server_info")
        driver.execute_script("window.localStorage.setItem('communityNux', JSON.stringify('1'));")
        before = _latest(topology, "hello_world/numbers")
        # The asset page shows where the output lives (definition metadata), before any run.
        open_page(driver, f"{topology.url}/assets/hello_world/numbers", "Materialize", PREFIX)
        click_button(driver, "Materialize")
        toast = wait_for_text(driver, "Launched run")
        short_id = re.search(r"Launched run ([0-9a-f]{8})", toast)
        assert short_id, toast[:1000]
        runs = topology.graphql("{ runsOrError(limit: 5) { ... on Runs { results { runId } } } }")
        run_id = next(r["runId"] for r in runs["runsOrError"]["results"] if r["runId"].startswith(short_id.group(1)))
        run = topology.wait_for_run(run_id, timeout=240)
        assert run["status"] == "SUCCESS", topology.log_tail()
        screenshot(driver, tmp_path, "materialized_from_ui")
        # Also lineage, in the same browser: from the evaluation up to the raw drops.
        open_page(
            driver,
            f"{topology.url}/assets/evaluation/quickstart_test_eval?view=lineage&lineageScope=upstream&lineageDepth=20",
            "quickstart_test_eval",
            # Node labels are middle-truncated ("quickstart_…_model"): their kinds still show.
            "_model",
            "_tokens",
            "_tokenizer",
            "raw",
            "dedup",
        )
        screenshot(driver, tmp_path, "lineage_eval_to_raw")
    finally:
        driver.quit()
    latest = _latest(topology, "hello_world/numbers")
    assert latest is not None and latest["runId"] == run_id and latest != before
    assert _ran_on(latest)["ray_node_id"] == _worker_node(topology)


def test_lineage_from_evaluation_reaches_the_raw_drop(topology: Topology):
    nodes = topology.graphql(ASSET_DEPS)["assetNodes"]
    deps = {"/".join(n["assetKey"]["path"]): ["/".join(d["path"]) for d in n["dependencyKeys"]] for n in nodes}
    seen, frontier = set(), ["evaluation/quickstart_test_eval"]
    while frontier:
        key = frontier.pop()
        if key not in seen:
            seen.add(key)
            frontier.extend(deps.get(key, []))
    assert {"checkpoints/quickstart_test_model", "tokenized/quickstart_test_tokens", "curation/raw"} <= seen
    raw = _latest(topology, "curation/raw", "drop-001")
    assert raw is not None
    uri = next(e.get("text") for e in raw["metadataEntries"] if e["label"] == "dagster/uri")
    assert uri.startswith(f"{PREFIX}/curation/raw-") and uri.endswith("/drop-001")


@pytest.mark.timeout(600)
def test_new_drop_in_gcs_landing_zone_runs_through_the_sensor(topology: Topology):
    listed = topology.graphql(SENSORS)["repositoriesOrError"]["nodes"][0]["sensors"]
    names = {sensor["name"] for sensor in listed}
    assert "landing_sensor_sample_html" in names
    # The automation sensor exists when some asset declares an automation condition (eager).
    for sensor in sorted(names & {"landing_sensor_sample_html", "default_automation_condition_sensor"}):
        selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": sensor}
        started = topology.graphql(START_SENSOR, {"selector": selector})["startSensor"]
        assert started["__typename"] == "Sensor", started
    proc = _run(
        [sys.executable, "-m", "marin_assets.landing.sample_data", "--prefix", PREFIX, "--drop", NEW_DROP]
        + ["--docs", "400"],
        topology.env,
        300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    landed = time.monotonic()

    def drop_partition() -> bool:
        with _postgres(topology) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM dynamic_partitions WHERE partition = %s", (NEW_DROP,))
            return cur.fetchone()[0] > 0

    def drop_run() -> dict | None:
        runs = topology.graphql(RUNS_WITH_TAG, {"key": "dagster/partition", "value": NEW_DROP})["runsOrError"]
        started = [r for r in runs["results"] if r["jobName"] == "curation_drop_job" and r["status"] != "QUEUED"]
        return started[0] if started else None

    _wait(drop_partition, 180, f"the sensor to add partition {NEW_DROP}")
    partition_s = time.monotonic() - landed
    run = _wait(drop_run, 240, f"the drop run of {NEW_DROP} to start")
    run_started_s = time.monotonic() - landed
    finished = topology.wait_for_run(run["runId"], timeout=420)
    drop_done_s = time.monotonic() - landed
    assert finished["status"] == "SUCCESS", topology.log_tail()
    # The rest of the drop's curation assets follow (in the drop run, or by eager automation).
    consolidated = _wait(lambda: _latest(topology, "curation/consolidated", NEW_DROP), 420, f"consolidated[{NEW_DROP}]")
    eager_s = time.monotonic() - landed
    print(
        f"\n[deploy] new {NEW_DROP} (400 docs) in gs:// landing: partition after {partition_s:.1f}s, "
        f"run started after {run_started_s:.1f}s, drop-local assets done after {drop_done_s:.1f}s, "
        f"eager consolidated after {eager_s:.1f}s"
    )
    assert _ran_on(_latest(topology, "curation/dedup", NEW_DROP))["ray_node_id"] == _worker_node(topology)
    # Its `marin/browser` link opens the topology's data browser on the drop's consolidated docs.
    opened = time.monotonic()
    _open_browser_link(topology, consolidated, NEW_DROP)
    print(f"[deploy] consolidated[{NEW_DROP}] marin/browser link served in {time.monotonic() - opened:.1f}s")


def test_postgres_and_bucket_hold_the_workflows_then_down_leaves_no_process(topology: Topology):
    import gcsfs

    with _postgres(topology) as conn, conn.cursor() as cur:
        cur.execute("SELECT status, count(*) FROM runs GROUP BY status")
        statuses = dict(cur.fetchall())
        cur.execute("SELECT DISTINCT partition FROM dynamic_partitions")
        partitions = {row[0] for row in cur.fetchall()}
        cur.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
        materializations = cur.fetchone()[0]
    assert statuses.get("SUCCESS", 0) >= 3, statuses
    assert {"drop-001", "drop-002", NEW_DROP} <= partitions
    assert materializations >= len(HEAVY_ASSETS)
    fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=topology.env["STORAGE_EMULATOR_HOST"])
    evaluations = fs.glob(f"{BUCKET}/marin/evaluation/quickstart-test-*/results.json")
    assert evaluations, fs.ls(f"{BUCKET}/marin")
    results = json.loads(fs.cat_file(evaluations[0]))
    assert "marin_docstring_mc" in results["results"]
    assert fs.exists(f"{BUCKET}/marin/landing/{curation.SOURCE}/{NEW_DROP}/manifest.json")
    assert fs.glob(f"{BUCKET}/dagster-compute-logs/**"), "compute logs were not written to the bucket"

    state = topology.state
    groups = [s.pid for s in state.services if s.name != "postgres"]
    postmaster = next(s.pid for s in state.services if s.name == "postgres")
    proc = _run(
        [sys.executable, "-m", "marin_resources.deploy.local", "down", "--state_dir", state.state_dir],
        {**os.environ},
        180,
    )
    assert proc.returncode == 0, proc.stderr
    leftovers = []
    for candidate in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmdline = " ".join(candidate.info["cmdline"] or [])
            in_group = os.getpgid(candidate.pid) in groups
        except (psutil.Error, ProcessLookupError):
            continue
        if candidate.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if in_group or state.state_dir in cmdline or (state.ray_temp_dir and state.ray_temp_dir in cmdline):
            leftovers.append((candidate.pid, cmdline[:120]))
    assert not psutil.pid_exists(postmaster) or psutil.Process(postmaster).status() == psutil.STATUS_ZOMBIE
    assert leftovers == []
