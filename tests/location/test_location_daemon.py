"""The location under a real ``dagster dev`` (webserver, daemon, code server): an eager step follows
its input with no switch turned on in the UI, and launched runs of one loaded location write under
the prefix their run config names."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.definitions import AUTOMATION_SENSOR
from tests.conftest import LAUNCH_RUN
from tests.ui.conftest import LOCATION, REPOSITORY, DagsterDev, metadata_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROJECT = Path(__file__).resolve().parent / "eager_project"
DAGSTER_ENV = {"MARIN_PROJECT_ROOT": str(PROJECT), "MARIN_EXPERIMENTS": "seams_eager/*.py"}
AUTOMATION_TIMEOUT_S = 240.0

SENSOR = """
query Sensor($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { status } }
  }
}
"""


def _launch(server: DagsterDev, name: str, run_config: dict | None = None) -> dict:
    params = {
        "selector": {
            "repositoryLocationName": LOCATION,
            "repositoryName": REPOSITORY,
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": asset_key_for(name).path}],
        },
        "runConfigData": run_config or {},
    }
    launched = server.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run = server.wait_for_run(launched["run"]["runId"])
    assert run["status"] == "SUCCESS", server.log_tail()
    return run


def test_an_eager_step_follows_its_input_with_no_switch_turned_on(dagster_dev: DagsterDev):
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY, "sensorName": AUTOMATION_SENSOR}
    sensor = dagster_dev.graphql(SENSOR, {"selector": selector})["sensorOrError"]
    assert sensor["__typename"] == "Sensor" and sensor["sensorState"]["status"] == "RUNNING", sensor
    follower = asset_key_for("seams/follower").path
    assert dagster_dev.materializations(follower) == []
    _launch(dagster_dev, "seams/source")
    deadline = time.monotonic() + AUTOMATION_TIMEOUT_S
    while not (materializations := dagster_dev.materializations(follower)):
        if time.monotonic() > deadline:
            pytest.fail(
                f"the eager follower was not materialized within {AUTOMATION_TIMEOUT_S}s\n{dagster_dev.log_tail()}"
            )
        time.sleep(2)
    run = dagster_dev.wait_for_run(materializations[0]["runId"])
    tags = {t["key"]: t["value"] for t in run["tags"]}
    assert tags.get("marin/source") == "automation" and tags.get("dagster/sensor_name") == AUTOMATION_SENSOR, tags
    assert metadata_of(materializations[0])["dagster/uri"].startswith(str(dagster_dev.prefix) + "/")


def test_launched_runs_of_one_loaded_location_write_under_their_own_prefix(dagster_dev: DagsterDev, tmp_path):
    source = asset_key_for("seams/source").path
    for name in ("first", "second"):
        prefix = tmp_path / name
        run = _launch(
            dagster_dev, "seams/source", {"resources": {"marin_storage": {"config": {"prefix": str(prefix)}}}}
        )
        (written,) = prefix.glob("seams/source-*/value.json")
        assert json.loads(written.read_text()) == {"total": 1}
        latest = dagster_dev.materializations(source, limit=1)[0]
        assert latest["runId"] == run["runId"]
        assert metadata_of(latest)["dagster/uri"] == str(written.parent)
