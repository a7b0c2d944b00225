"""The production topology on one machine (``scripts/local_deploy.sh``), driven as a user would.

One topology for the module: Postgres, fake-gcs-server, a Ray head + worker node reached over
``ray://`` (the worker also advertises a GPU and a v4-8 TPU head as labels, so accelerator steps
can be placed), the user-code gRPC server, dagster-webserver and dagster-daemon. The tests, in order:

1. every kind of step (plain, ``@ray.remote``, CPU, GPU, TPU configs) runs over ``ray://`` on the
   worker node, and records where;
2. the quickstart (test size) runs from the command line into ``gs://``, recorded in Postgres; its
   heavy steps (curation shards, tokenize, train, eval) ran on the worker node, not in the driver;
3. an asset is materialized from the UI in headless Chromium (a real run through the daemon's queue);
4. drops keep flowing through the ``gs://`` landing zone in one run of the topology: three good
   drops land one after another, and a drop whose manifest names a wrong sha256 lands between the
   first and the second. Each good drop gets its partition and one run, started at most 60 s after
   its manifest was written (figures printed), and its assets follow up to its consolidated
   documents; the rejected drop gets neither, and its reason shows on every landing sensor tick
   after it (skip reason or tick log, what the UI's tick history shows) and in the landing zone's
   drops view (``landing/sample_html``). The first drop's ``marin/browser`` link opens the
   topology's data browser on its documents (folder, then a page of records from the bucket);
5. lineage from the evaluation to the raw drop, in the browser and over GraphQL;
6. Postgres and the bucket hold what the workflows did; ``--down`` leaves no process behind.
"""

from __future__ import annotations

import datetime
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
from tests.conftest import Topology, deploy_topology
from tests.ui.conftest import LOCATION, REPOSITORY, TERMINAL_RUN_STATUSES
from tests.ui.test_browser import _missing_browser_parts, click_button, open_page, screenshot, wait_for_text

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BUCKET = "marin-deploy-test"
PREFIX = f"gs://{BUCKET}/marin"
WORKER_RESOURCES = {"TPU": 4, "TPU-v4-8-head": 1}
GOOD_DROPS = ("drop-003", "drop-005", "drop-006")
REJECTED_DROP = "drop-004"  # lands between the first and the second good drop
DROP_DOCS = 120  # as many as the quickstart's drops (all drops of one source share the count)
LANDING_SENSOR = "landing_sensor_sample_html"
LANDING_VIEW = ["landing", "sample_html"]
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
SENSOR_TICKS = """
query Ticks($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { ticks(limit: 500) { status timestamp skipReason runIds error { message }
                                                       logEvents { events { message } } } } }
  }
}
"""
LANDING_OBSERVATIONS = """
query Observations($key: AssetKeyInput!) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset { assetObservations(limit: 1) { timestamp metadataEntries { label
                   ... on TableMetadataEntry { table { records } } } } }
  }
}
"""
SENSORS = "{ repositoriesOrError { ... on RepositoryConnection { nodes { sensors { name } } } } }"
ASSET_DEPS = "{ assetNodes { assetKey { path } dependencyKeys { path } } }"


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


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
        yield deploy_topology(state)
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
        # A link to the task's page (its job and logs) on the topology's dashboard ...
        dashboard = topology.state.env["MARIN_RAY_DASHBOARD_URL"]
        # ... its job named by the submission id (unique across restarts), not Ray's 01000000-style id.
        submission = placement["ray_job_submission_id"]
        assert submission.startswith("marin-") and submission != placement["ray_job_id"], name
        task_page = f"{dashboard}/#/jobs/{submission}/tasks/{placement['ray_task_id']}"
        assert meta["marin/ray_task"]["value"] == task_page, name
        assert "marin/ray_job" not in meta and "marin/ray_logs" not in meta, name
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
    # Recorded in Postgres as one run tagged by the command line (one run per executor_main invocation).
    with _postgres(topology) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM run_tags WHERE key = 'marin/source' AND value = 'executor_main'")
        assert cur.fetchone()[0] == 1
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


def _gcs(topology: Topology):
    """A fresh gcsfs client of the topology's bucket (no listing cache: this test reads what is there now)."""
    import gcsfs

    return gcsfs.GCSFileSystem(
        token="anon",
        endpoint_url=topology.env["STORAGE_EMULATOR_HOST"],
        use_listings_cache=False,
        skip_instance_cache=True,
    )


def _drop_path(drop: str) -> str:
    return f"{BUCKET}/marin/landing/{curation.SOURCE}/{drop}"


def _manifest_written_at(topology: Topology, drop: str) -> float:
    """When the drop's manifest was written: the object's `updated` time on the GCS server (epoch seconds)."""
    info = _gcs(topology).info(f"{_drop_path(drop)}/manifest.json")
    updated = info.get("updated") or info.get("mtime")
    if isinstance(updated, str):
        updated = datetime.datetime.fromisoformat(updated.replace("Z", "+00:00"))
    assert isinstance(updated, datetime.datetime), info
    return updated.timestamp()


def _land_good_drop(topology: Topology, drop: str) -> None:
    cmd = [sys.executable, "-m", "marin_assets.experiments.sample_data", "--prefix", PREFIX, "--drop", drop]
    proc = _run(cmd + ["--docs", str(DROP_DOCS)], topology.env, 300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _land_drop_with_a_bad_checksum(topology: Topology, drop: str, scratch: Path) -> str:
    """Upload a drop whose files are intact but whose manifest names a wrong sha256 for one of them.

    Generated locally, then uploaded data files first and the manifest last (as an uploader does),
    so the sensor never sees it complete with a good manifest. Returns the file with the bad checksum.
    """
    cmd = [sys.executable, "-m", "marin_assets.experiments.sample_data", "--prefix", str(scratch), "--drop", drop]
    proc = _run(cmd + ["--docs", str(DROP_DOCS)], topology.env, 300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    local = scratch / "landing" / curation.SOURCE / drop
    manifest = json.loads((local / "manifest.json").read_text())
    bad = manifest["files"][0]
    bad["sha256"] = "0" * 64
    fs = _gcs(topology)
    for entry in manifest["files"]:
        fs.put_file(str(local / entry["path"]), f"{_drop_path(drop)}/{entry['path']}")
    fs.pipe_file(f"{_drop_path(drop)}/manifest.json", json.dumps(manifest).encode())
    return bad["path"]


def _partition_added(topology: Topology, drop: str) -> bool:
    with _postgres(topology) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM dynamic_partitions WHERE partition = %s", (drop,))
        return cur.fetchone()[0] > 0


def _drop_runs(topology: Topology, drop: str) -> list[dict[str, Any]]:
    runs = topology.graphql(RUNS_WITH_TAG, {"key": "dagster/partition", "value": drop})["runsOrError"]
    return [r for r in runs["results"] if r["jobName"] == "curation_drop_job"]


def _curation_runs_in_flight(topology: Topology) -> list[dict[str, Any]]:
    runs = topology.graphql(RUNS_WITH_TAG, {"key": "marin/curation", "value": curation.SOURCE})["runsOrError"]
    return [r for r in runs["results"] if r["status"] not in TERMINAL_RUN_STATUSES]


def _started_drop_run(topology: Topology, drop: str) -> dict[str, Any] | None:
    started = [r for r in _drop_runs(topology, drop) if r["startTime"] is not None]
    return started[0] if started else None


def _landing_sensor_ticks(topology: Topology) -> list[dict[str, Any]]:
    """The landing sensor's finished ticks, oldest first, with their skip reason and log messages."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": LANDING_SENSOR}
    sensor = topology.graphql(SENSOR_TICKS, {"selector": selector})["sensorOrError"]
    assert sensor["__typename"] == "Sensor", sensor
    ticks = [t for t in sensor["sensorState"]["ticks"] if t["status"] != "STARTED"]
    return sorted(ticks, key=lambda t: t["timestamp"])


def _tick_text(tick: dict[str, Any]) -> str:
    """What the UI's tick history shows of a tick: its skip reason, error, and its logs ("View logs")."""
    parts = [tick.get("skipReason") or "", (tick.get("error") or {}).get("message") or ""]
    parts += [event["message"] for event in tick["logEvents"]["events"]]
    return "\n".join(parts)


def _landing_view(topology: Topology) -> dict[str, dict[str, Any]]:
    """The rows (drop -> row) of the latest observation of the landing zone's drops view."""
    variables = {"key": {"path": LANDING_VIEW}}
    asset = topology.graphql(LANDING_OBSERVATIONS, variables)["assetOrError"]
    assert asset["__typename"] == "Asset", asset
    observations = asset["assetObservations"]
    if not observations:
        return {}
    tables = [e["table"]["records"] for e in observations[0]["metadataEntries"] if e["label"] == "drops"]
    assert tables, observations[0]
    rows = [json.loads(record) for record in tables[0]]
    return {row["drop"]: row for row in rows}


def _follow_good_drop(topology: Topology, drop: str) -> dict[str, Any]:
    """Land ``drop``, follow it to its consolidated documents; returns the figures (seconds)."""
    _land_good_drop(topology, drop)
    landed = time.monotonic()
    written_at = _manifest_written_at(topology, drop)
    _wait(lambda: _partition_added(topology, drop), 180, f"the sensor to add partition {drop}")
    partition_s = time.monotonic() - landed
    run = _wait(lambda: _started_drop_run(topology, drop), 240, f"the drop run of {drop} to start")
    finished = topology.wait_for_run(run["runId"], timeout=420)
    drop_done_s = time.monotonic() - landed
    assert finished["status"] == "SUCCESS", topology.log_tail()
    assert len(_drop_runs(topology, drop)) == 1, _drop_runs(topology, drop)  # one run per drop
    # The rest of the drop's curation assets follow (in the drop run, or by eager automation).
    consolidated = _wait(lambda: _latest(topology, "curation/consolidated", drop), 420, f"consolidated[{drop}]")
    figures = {
        "drop": drop,
        "manifest_to_run_start_s": run["startTime"] - written_at,
        "partition_s": partition_s,
        "drop_done_s": drop_done_s,
        "consolidated_s": time.monotonic() - landed,
        "consolidated": consolidated,
    }
    print(
        f"\n[deploy] {drop} ({DROP_DOCS} docs) in the gs:// landing zone: its run started "
        f"{figures['manifest_to_run_start_s']:.1f}s after its manifest was written; partition after "
        f"{partition_s:.1f}s, drop-local assets done after {drop_done_s:.1f}s, consolidated after "
        f"{figures['consolidated_s']:.1f}s"
    )
    return figures


@pytest.mark.timeout(1800)
def test_three_drops_and_a_rejected_one_flow_through_the_gcs_landing_zone(topology: Topology, tmp_path):
    listed = topology.graphql(SENSORS)["repositoriesOrError"]["nodes"][0]["sensors"]
    names = {sensor["name"] for sensor in listed}
    assert LANDING_SENSOR in names
    # The automation sensor exists when some asset declares an automation condition (eager).
    for sensor in sorted(names & {LANDING_SENSOR, "default_automation_condition_sensor"}):
        selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": sensor}
        started = topology.graphql(START_SENSOR, {"selector": selector})["startSensor"]
        assert started["__typename"] == "Sensor", started
    # Turned on now, the landing sensor's first tick marks the drops the quickstart processed from the
    # command line as processed (their units succeeded): no catch-up run. Drops land after that, as
    # they do on a deployment whose sensor is always on.
    caught_up = time.monotonic()
    _wait(lambda: _landing_sensor_ticks(topology), 120, "the landing sensor's first tick")
    _wait(lambda: not _curation_runs_in_flight(topology), 600, "no curation run in flight")
    for drop in ("drop-001", "drop-002"):
        assert _partition_added(topology, drop), drop
        assert _drop_runs(topology, drop) == [], f"a catch-up run of {drop}, whose units had succeeded"
    print(f"\n[deploy] landing sensor caught up with drop-001, drop-002 in {time.monotonic() - caught_up:.1f}s")
    first, *later = GOOD_DROPS
    figures = [_follow_good_drop(topology, first)]

    # A rejected drop between the good ones: its files are there, one checksum in its manifest is wrong.
    bad_file = _land_drop_with_a_bad_checksum(topology, REJECTED_DROP, tmp_path / "scratch")
    rejected_landed = time.monotonic()
    rejected_written_at = _manifest_written_at(topology, REJECTED_DROP)

    def rejection_reported() -> dict[str, Any] | None:
        for tick in _landing_sensor_ticks(topology):
            if tick["timestamp"] >= rejected_written_at and REJECTED_DROP in _tick_text(tick):
                return tick
        return None

    first_report = _wait(rejection_reported, 180, f"a landing sensor tick reporting {REJECTED_DROP}")
    print(
        f"[deploy] rejected {REJECTED_DROP} reported by the landing sensor after {time.monotonic() - rejected_landed:.1f}s"
    )
    assert f"{bad_file}: sha256" in _tick_text(first_report), _tick_text(first_report)

    # The next good drops keep flowing while the rejected one sits in the landing zone.
    figures += [_follow_good_drop(topology, drop) for drop in later]

    # Every tick after the first report still shows the rejection, with its reason; the UI's tick history.
    ticks = [t for t in _landing_sensor_ticks(topology) if t["timestamp"] >= first_report["timestamp"]]
    assert len(ticks) >= 3, ticks
    for tick in ticks:
        text = _tick_text(tick)
        assert REJECTED_DROP in text and f"{bad_file}: sha256" in text, (tick["status"], tick["timestamp"], text)
    # ... including the ticks that started the later drops' runs.
    assert any(t["runIds"] for t in ticks), [t["status"] for t in ticks]
    # The rejected drop got no partition and no run.
    assert not _partition_added(topology, REJECTED_DROP)
    assert _drop_runs(topology, REJECTED_DROP) == []
    # The landing zone's drops view (the landing/<source> asset) shows it rejected, with the reason,
    # and the good drops processed.
    view = _wait(
        lambda: (
            (v := _landing_view(topology)) and all(v.get(d, {}).get("status") == "processed" for d in GOOD_DROPS) and v
        ),
        180,
        "the landing zone's drops view to show the good drops processed",
    )
    assert view[REJECTED_DROP]["status"] == "rejected" and f"{bad_file}: sha256" in view[REJECTED_DROP]["reason"], view

    print(
        f"[deploy] {len(ticks)} landing sensor ticks after the rejection, every one reporting it; "
        + "; ".join(f"{f['drop']}: run {f['manifest_to_run_start_s']:.1f}s after its manifest" for f in figures)
    )
    for f in figures:
        assert f["manifest_to_run_start_s"] <= 60.0, figures
        assert _ran_on(_latest(topology, "curation/dedup", f["drop"]))["ray_node_id"] == _worker_node(topology)
    # The first drop's `marin/browser` link opens the topology's data browser on its consolidated docs.
    opened = time.monotonic()
    _open_browser_link(topology, figures[0]["consolidated"], first)
    print(f"[deploy] consolidated[{first}] marin/browser link served in {time.monotonic() - opened:.1f}s")


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
    assert {"drop-001", "drop-002", *GOOD_DROPS} <= partitions and REJECTED_DROP not in partitions
    assert materializations >= len(HEAVY_ASSETS)
    fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=topology.env["STORAGE_EMULATOR_HOST"])
    evaluations = fs.glob(f"{BUCKET}/marin/evaluation/quickstart-test-*/results.json")
    assert evaluations, fs.ls(f"{BUCKET}/marin")
    results = json.loads(fs.cat_file(evaluations[0]))
    assert "marin_docstring_mc" in results["results"]
    assert all(fs.exists(f"{_drop_path(drop)}/manifest.json") for drop in (*GOOD_DROPS, REJECTED_DROP))
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
