"""Accelerator configs -> Ray requests, TPU topology, spec parsing (no Ray cluster needed)."""

from __future__ import annotations

import pytest

from marin_resources.accelerators import (
    CpuConfig,
    GpuConfig,
    TpuConfig,
    accelerator_from_dict,
    accelerator_to_dict,
    normalize_tpu_type,
    parse_accelerator,
    tpu_topology,
)


def test_cpu_options():
    assert CpuConfig().ray_remote_options() == {"num_cpus": 1}
    assert CpuConfig(num_cpus=4, memory_bytes=2**30).ray_remote_options() == {"num_cpus": 4, "memory": 2**30}


def test_gpu_options():
    assert GpuConfig().ray_remote_options() == {"num_cpus": 1, "num_gpus": 1}
    assert GpuConfig(gpu_count=8, accelerator_type="A100").ray_remote_options() == {
        "num_cpus": 1,
        "num_gpus": 8,
        "accelerator_type": "A100",
    }


@pytest.mark.parametrize(
    ("tpu_type", "chips_per_host"),
    [
        ("v4-8", 4),
        ("v4-32", 4),
        ("v5p-8", 4),
        ("v5e-8", 8),
        ("v5litepod-4", 4),
        ("v5e-16", 4),
        ("v6e-8", 8),
        ("v6e-16", 4),
    ],
)
def test_tpu_head_request(tpu_type: str, chips_per_host: int):
    config = TpuConfig(tpu_type=tpu_type)
    name = normalize_tpu_type(tpu_type)
    assert config.ray_remote_options() == {
        "num_cpus": 1,
        "resources": {"TPU": chips_per_host, f"TPU-{name}-head": 1},
    }


def test_tpu_table_matches_levanter():
    # Levanter's table is what run_on_pod uses to find hosts; ours must agree on every known slice.
    from levanter.infra.ray_tpu import TPU_CONFIGS

    assert len(TPU_CONFIGS) > 30
    for known in TPU_CONFIGS:
        ours = tpu_topology(known.name)
        assert (ours.chips, ours.hosts, ours.chips_per_host) == (
            known.chip_count,
            known.vm_count,
            known.chips_per_vm,
        ), known


def test_tpu_validation():
    with pytest.raises(ValueError, match="no TPU slice"):
        TpuConfig(tpu_type="v4-12")
    with pytest.raises(ValueError, match="unknown TPU generation"):
        TpuConfig(tpu_type="v9-8")
    with pytest.raises(ValueError, match="slice_count"):
        TpuConfig(tpu_type="v4-8", slice_count=0)
    with pytest.raises(ValueError, match="single_host=True needs one single-host slice"):
        TpuConfig(tpu_type="v4-16", single_host=True)
    assert TpuConfig(tpu_type="V5E-8").tpu_type == "v5litepod-8"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("cpu", CpuConfig()),
        ("cpu:4", CpuConfig(num_cpus=4)),
        ("gpu", GpuConfig()),
        ("gpu:2", GpuConfig(gpu_count=2)),
        ("gpu:H100", GpuConfig(gpu_count=1, accelerator_type="H100")),
        ("gpu:A100x8", GpuConfig(gpu_count=8, accelerator_type="A100")),
        ("gpu:A10Gx2", GpuConfig(gpu_count=2, accelerator_type="A10G")),
        ("tpu:v4-8", TpuConfig(tpu_type="v4-8")),
        ("tpu:v5e-16x2", TpuConfig(tpu_type="v5litepod-16", slice_count=2)),
    ],
)
def test_parse_accelerator(spec, expected):
    assert parse_accelerator(spec) == expected


@pytest.mark.parametrize("spec", ["fpga", "gpu:2x", "tpu", "tpu:v4", "tpu:v4-8x", "gpu:A100x"])
def test_parse_accelerator_rejects(spec):
    with pytest.raises(ValueError):
        parse_accelerator(spec)


def test_accelerator_from_dict_round_trip():
    for acc in (
        CpuConfig(num_cpus=2),
        GpuConfig(gpu_count=4, accelerator_type="L4"),
        TpuConfig(tpu_type="v6e-8", slice_count=2),
    ):
        assert accelerator_from_dict(accelerator_to_dict(acc)) == acc
    assert accelerator_from_dict({"tpu": {"tpu_type": "v4-8"}}) == TpuConfig()
    assert accelerator_from_dict(None) == CpuConfig()
    assert accelerator_from_dict("gpu:A100x8") == GpuConfig(gpu_count=8, accelerator_type="A100")
    # Config files written with the short GPU field names still read.
    assert accelerator_from_dict({"kind": "gpu", "count": 2, "type": "h100"}) == GpuConfig(2, accelerator_type="H100")
    with pytest.raises(ValueError, match="bad fields"):
        accelerator_from_dict({"kind": "gpu", "cores": 3})


def test_one_gpu_config_for_marin_scripts_resource_configs_and_specs():
    import marin_resources
    from marin_resources.resource_config import ResourceConfig

    assert marin_resources.GpuConfig is GpuConfig
    assert ResourceConfig.with_gpu("h100", 8).device == parse_accelerator("gpu:H100x8")
    with pytest.raises(ValueError, match="unknown accelerator kind"):
        accelerator_from_dict({"kind": "npu"})
