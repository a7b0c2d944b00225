"""default_train passes accelerator configs through to the engine's Ray requests."""

from __future__ import annotations

import pytest

from marin_assets.training.levanter_train import (
    SimpleTrainConfig,
    TrainConfig,
    accelerator_kind,
    default_train,
    training_env,
)

accelerators = pytest.importorskip("marin_resources.accelerators")

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("resources", "expected", "kind"),
    [
        (None, None, "cpu"),
        (accelerators.CpuConfig(num_cpus=2), {"num_cpus": 2}, "cpu"),
        (
            accelerators.GpuConfig(count=2, type="A100"),
            {"num_cpus": 1, "num_gpus": 2, "accelerator_type": "A100"},
            "gpu",
        ),
        (accelerators.TpuConfig(tpu_type="v4-8"), {"num_cpus": 1, "resources": {"TPU": 4, "TPU-v4-8-head": 1}}, "tpu"),
        (
            accelerators.TpuConfig(tpu_type="v5e-16", slice_count=2),
            {"num_cpus": 1, "resources": {"TPU": 4, "TPU-v5litepod-16-head": 1}},
            "tpu",
        ),
    ],
)
def test_train_step_requests_the_accelerator(resources, expected, kind):
    step = default_train("acc", "/caches/x", resources=resources)
    assert step.resources is resources
    if expected is not None:
        assert step.resources.ray_remote_options() == expected
    assert step.config.accelerator == kind == accelerator_kind(resources)


def test_resources_do_not_change_the_output_path():
    from marin_assets.execution.versioning import StepGraph

    cpu = default_train("acc", "/caches/x")
    gpu = default_train("acc", "/caches/x", resources=accelerators.GpuConfig(count=1))
    other = default_train("acc", "/caches/x", train_config=SimpleTrainConfig(num_train_steps=7))
    graph = StepGraph([cpu, gpu, other], "/p")
    assert graph.resolved(cpu).output_path == graph.resolved(gpu).output_path
    assert graph.resolved(other).output_path != graph.resolved(cpu).output_path


def test_only_cpu_training_pins_jax_to_cpu(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert training_env(accelerator="cpu")["JAX_PLATFORMS"] == "cpu"
    assert "JAX_PLATFORMS" not in training_env(accelerator="gpu")
    assert "JAX_PLATFORMS" not in training_env(accelerator="tpu")
    monkeypatch.setenv("WANDB_API_KEY", "")
    assert training_env()["WANDB_MODE"] == "disabled"


def test_gpu_training_requires_an_accelerator_in_levanter(tmp_path):
    from marin_assets.training.levanter_train import build_levanter_config

    cache = tmp_path / "cache"
    (cache / "train").mkdir(parents=True)
    base = dict(output_path=str(tmp_path / "out"), components={"d": str(cache)}, weights={"d": 1.0}, tokenizer="/tok")
    assert build_levanter_config(TrainConfig(**base)).trainer.require_accelerator is False
    assert build_levanter_config(TrainConfig(**base, accelerator="gpu")).trainer.require_accelerator is True
