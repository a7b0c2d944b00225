"""default_train passes accelerator configs through to the engine's Ray requests; CPU runs locally."""

from __future__ import annotations

import dataclasses

import pytest

from marin_assets.experiments.defaults import default_train
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.training.train_config import TINY_LLAMA
from marin_assets.training.training import (
    MixtureSpec,
    SourceSpec,
    TrainLmOnPodConfig,
    accelerator_of,
    training_env,
)

accelerators = pytest.importorskip("marin_resources.accelerators")

pytestmark = pytest.mark.timeout(60)


def _train(resources, steps: int = 3):
    return default_train(
        "acc",
        "/caches/x",
        TINY_LLAMA,
        SimpleTrainConfig(resources=resources, train_batch_size=2, num_train_steps=steps, learning_rate=1e-3),
    )


@pytest.mark.parametrize(
    ("resources", "expected", "kind"),
    [
        (None, None, "cpu"),
        (accelerators.CpuConfig(num_cpus=2), None, "cpu"),
        (
            accelerators.GpuConfig(gpu_count=2, accelerator_type="A100"),
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
    step = _train(resources)
    assert accelerator_of(resources) == kind
    if expected is None:
        assert step.resources is None  # CPU training: Levanter in a local subprocess
    else:
        assert step.resources is resources
        assert step.resources.ray_remote_options() == expected
    assert step.config.resources is resources


def test_resources_do_not_change_the_output_path():
    from marin_assets.execution.step import versioned
    from marin_assets.execution.versioning import StepGraph

    cpu = _train(None)
    gpu = _train(accelerators.GpuConfig(gpu_count=1))
    other = _train(None, steps=versioned(7))
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
    from marin_assets.training.levanter_config import build_levanter_config

    cache = tmp_path / "cache"
    (cache / "train").mkdir(parents=True)
    tok = tmp_path / "tok"
    tok.mkdir()
    step = _train(None)
    spec = step.config.train_config
    data = MixtureSpec(configs={"d": SourceSpec(cache_dir=str(cache))}, train_weights={"d": 1.0}, tokenizer=str(tok))
    spec = dataclasses.replace(spec, data=data)
    out = str(tmp_path / "out")
    cpu = TrainLmOnPodConfig(train_config=spec, resources=None, output_path=out)
    gpu = TrainLmOnPodConfig(train_config=spec, resources=accelerators.GpuConfig(gpu_count=1), output_path=out)
    assert build_levanter_config(cpu).trainer.require_accelerator is False
    assert build_levanter_config(gpu).trainer.require_accelerator is True
