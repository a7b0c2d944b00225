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


def test_fray_resource_config_constructors():
    from marin_resources import ResourceConfig
    from marin_resources.accelerators import CpuConfig, GpuConfig, TpuConfig

    cpu = ResourceConfig.with_cpu()
    assert (cpu.cpu, cpu.ram, cpu.disk, cpu.replicas, cpu.preemptible, cpu.regions) == (1, "128m", "1g", 1, True, None)
    assert isinstance(cpu.device, CpuConfig) and cpu.chip_count() == 0 and cpu.accelerator_descriptor() is None
    assert cpu.as_remote_kwargs()["memory"] == 128 << 20
    assert cpu.as_remote_kwargs()["runtime_env"]["env_vars"]["JAX_PLATFORMS"] == "cpu"
    gpu = ResourceConfig.with_gpu("h100", count=8)
    assert gpu.device == GpuConfig(gpu_count=8, accelerator_type="H100") and gpu.chip_count() == 8
    assert gpu.as_remote_kwargs()["num_gpus"] == 8 and "JAX_PLATFORMS" not in str(gpu.as_remote_kwargs())
    assert ResourceConfig.with_gpu().device.accelerator_type is None  # "auto": any GPU
    tpu = ResourceConfig.with_tpu("v4-8", slice_count=2)
    assert isinstance(tpu.device, TpuConfig) and tpu.replicas == 2 and tpu.chip_count() == 8
    assert tpu.accelerator_descriptor() == "v4-8"
    assert tpu.with_env_vars(A="1").runtime_env == {"env_vars": {"A": "1"}}
    with pytest.raises(ValueError, match="v9"):
        ResourceConfig.with_tpu("v9-8")
    with pytest.raises(ValueError, match="cannot read the size"):
        ResourceConfig(ram="lots")
    with pytest.raises(ValueError, match="needs a TPU device"):
        ResourceConfig(replicas=2)


@pytest.mark.timeout(120)
def test_with_cpu_and_with_tpu_launch_on_ray(ray_head):
    from marin_resources import ResourceConfig

    out = ResourceConfig.with_cpu(cpu=2).with_env_vars(MARIN_TEST_MARKER="w").launch(_probe, Probe())
    assert out["pid"] != os.getpid() and out["assigned"].get("CPU") == 2
    assert (out["jax_platforms"], out["marker"]) == ("cpu", "w")
    if os.path.exists(TPU_LOCKFILE):
        pytest.skip(f"{TPU_LOCKFILE} exists on this machine (a real TPU user?)")
    out = ResourceConfig.with_tpu("v4-8").launch(_probe, Probe(make_lockfile=True))
    assert out["assigned"].get("TPU-v4-8-head") == 1
    assert not os.path.exists(TPU_LOCKFILE)
