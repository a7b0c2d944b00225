"""Marin's resource configs (``marin_resources.CpuOnlyConfig`` / ``TpuPodConfig``) launching steps on a
real local Ray whose node carries a fake TPU v4-8 host: requests, runtime_env, TPU lockfile cleanup."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from marin_resources import CpuOnlyConfig, TpuPodConfig
from marin_resources.resource_config import TPU_LOCKFILE

pytestmark = pytest.mark.ray


@dataclass(frozen=True)
class Probe:
    make_lockfile: bool = False


def _probe(config: Probe) -> dict:
    """Runs inside a Ray worker; optionally leaves libtpu's lockfile behind as libtpu does."""
    import ray

    if config.make_lockfile:
        with open(TPU_LOCKFILE, "w") as handle:
            handle.write("held")
    return {
        "pid": os.getpid(),
        "assigned": dict(ray.get_runtime_context().get_assigned_resources()),
        "jax_platforms": os.environ.get("JAX_PLATFORMS"),
        "marker": os.environ.get("MARIN_TEST_MARKER"),
    }


@pytest.mark.timeout(120)
def test_cpu_only_config_requests_cpus_and_pins_jax_to_cpu(ray_head):
    config = CpuOnlyConfig(num_cpus=2, runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu", "MARIN_TEST_MARKER": "m"}})
    out = config.launch(_probe, Probe())
    assert out["pid"] != os.getpid()
    assert out["assigned"].get("CPU") == 2
    assert (out["jax_platforms"], out["marker"]) == ("cpu", "m")


@pytest.mark.timeout(120)
def test_fake_tpu_pod_config_runs_on_the_head_and_removes_the_lockfile(ray_head):
    if os.path.exists(TPU_LOCKFILE):
        pytest.skip(f"{TPU_LOCKFILE} exists on this machine (a real TPU user?)")
    out = TpuPodConfig(tpu_type="v4-8").launch(_probe, Probe(make_lockfile=True))
    assert out["assigned"].get("TPU-v4-8-head") == 1
    assert not os.path.exists(TPU_LOCKFILE)  # removed when the task ended
