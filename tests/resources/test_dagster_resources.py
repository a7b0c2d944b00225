"""RayResource and MarinStorageResource in real Dagster runs against the package's embedded Ray."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from marin_resources.dagster_resources import MarinStorageResource, RayResource
from marin_resources.ray_connect import get_default_config

from . import dagster_defs

pytestmark = pytest.mark.ray


@pytest.mark.timeout(180)
def test_materialize_with_ray_and_storage_resources(ray_head, tmp_path):
    prefix = tmp_path / "out"
    result = dg.materialize(
        [dagster_defs.ray_step_a, dagster_defs.ray_step_b],
        resources={"ray": RayResource(namespace="marin"), "marin_storage": MarinStorageResource(prefix=str(prefix))},
    )
    assert result.success
    a = result.output_for_node("ray_step_a")
    b = result.output_for_node("ray_step_b")
    assert a["value"] == 2 and b["value"] == 4
    assert b["assigned"].get("TPU-v4-8-head") == 1  # the fake TPU head was requested and granted
    assert a["gcs"].rpartition(":")[2] == ray_head.rpartition(":")[2]  # the shared head, not a new one
    assert json.loads((prefix / "ray_step_b.json").read_text())["value"] == 4
    # Setup made the resource's config the engine's default for plain ensure_ray() calls.
    assert get_default_config().namespace == "marin"


@pytest.mark.timeout(240)
def test_multiprocess_run_steps_share_one_ray(ray_head, tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    prefix = tmp_path / "out"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("MARIN_TEST_PREFIX", str(prefix))
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(dg.reconstructable(dagster_defs.two_ray_steps_job), instance=instance)
        assert result.success
    a = json.loads((prefix / "ray_step_a.json").read_text())
    b = json.loads((prefix / "ray_step_b.json").read_text())
    assert a["step_pid"] != b["step_pid"]  # two step processes...
    assert a["gcs"] == b["gcs"]  # ...on one Ray...
    assert a["gcs"].rpartition(":")[2] == ray_head.rpartition(":")[2]  # ...the one already running
    assert b["assigned"].get("TPU") == 4


def test_storage_resource_rejects_bad_prefix():
    with pytest.raises(ValueError, match="unknown storage protocol"):
        MarinStorageResource(prefix="nosuchproto://x").root()


def test_ray_resource_config_mapping():
    resource = RayResource(address="ray://head:10001", num_cpus=3, resources={"TPU": 4}, include_dashboard=True)
    config = resource.cluster_config()
    assert (config.address, config.num_cpus, config.resources, config.include_dashboard) == (
        "ray://head:10001",
        3,
        {"TPU": 4},
        True,
    )
