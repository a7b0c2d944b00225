"""The accelerator settings of a training run (issue 35 items 3 and 5): per-device-kind defaults,
XLA flags in the training process, the compilation cache, ``trainer.distributed``, the ``gpu`` extra."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def _pod(tmp_path, resources=None, **trainer_fields):
    from marin_assets.training.train_config import LlamaModelConfig
    from marin_assets.training.training import (
        LmTrainSpec,
        MixtureSpec,
        OptimizerSpec,
        SourceSpec,
        TrainerSpec,
        TrainLmOnPodConfig,
    )

    cache = tmp_path / "cache"
    (cache / "train").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tok").mkdir(exist_ok=True)
    spec = LmTrainSpec(
        data=MixtureSpec(
            configs={"d": SourceSpec(cache_dir=str(cache))}, train_weights={"d": 1.0}, tokenizer=str(tmp_path / "tok")
        ),
        trainer=TrainerSpec(train_batch_size=4, num_train_steps=2, **trainer_fields),
        model=LlamaModelConfig(),
        optimizer=OptimizerSpec(learning_rate=1e-3),
    )
    return TrainLmOnPodConfig(train_config=spec, resources=resources, output_path=str(tmp_path / "runs" / "run-1"))


def test_xla_flags_join_the_training_process_environment(tmp_path):
    from marin_assets.training.training import training_process_env

    pod = _pod(tmp_path, xla_flags=("--xla_force_host_platform_device_count=4",))
    pod = dataclasses.replace(pod, env_vars={"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    env = training_process_env(pod)
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=4"
    plain = training_process_env(_pod(tmp_path / "plain"))
    assert "device_count=4" not in plain.get("XLA_FLAGS", "")


def test_device_kind_defaults_and_explicit_settings_reach_levanter(tmp_path, monkeypatch):
    from marin_assets.training.device_defaults import COMPILATION_CACHE_ENV
    from marin_assets.training.levanter_config import build_levanter_config
    from marin_resources import accelerators

    monkeypatch.delenv(COMPILATION_CACHE_ENV, raising=False)
    gpu = accelerators.GpuConfig(gpu_count=1)
    trainer = build_levanter_config(_pod(tmp_path, resources=gpu)).trainer
    # GPU: bf16 compute; jax.distributed never auto-initialized (mpi4py hosts); the cache beside the run.
    assert trainer.mp.compute_dtype.__name__ == "bfloat16"
    assert trainer.distributed.initialize_jax_distributed is False
    assert trainer.jax_compilation_cache_dir == str(tmp_path / "runs" / ".jax_compilation_cache")
    cpu = build_levanter_config(_pod(tmp_path, model_axis_size=2, fsdp_axis=("embed", "mlp"), mp="p=f32,c=bfloat16"))
    assert (cpu.trainer.model_axis_size, cpu.trainer.fsdp_axis) == (2, ["embed", "mlp"])
    assert cpu.trainer.mp.compute_dtype.__name__ == "bfloat16"
    monkeypatch.setenv(COMPILATION_CACHE_ENV, "gs://bucket/jax-cache")
    assert build_levanter_config(_pod(tmp_path)).trainer.jax_compilation_cache_dir == "gs://bucket/jax-cache"
    off = _pod(tmp_path, jax_compilation_cache_dir="off")
    assert build_levanter_config(off).trainer.jax_compilation_cache_dir is None


def test_a_given_distributed_config_is_kept_and_the_switch_turns_it_off(tmp_path):
    from levanter.distributed import DistributedConfig

    from marin_assets.training.levanter_config import build_levanter_config
    from marin_resources import accelerators

    given = DistributedConfig(coordinator_address="10.0.0.1:1234", num_processes=2)
    gpu = accelerators.GpuConfig(gpu_count=8)
    kept = build_levanter_config(_pod(tmp_path, resources=gpu, distributed=given)).trainer.distributed
    assert kept == given and kept.initialize_jax_distributed is True
    off = build_levanter_config(_pod(tmp_path, initialize_jax_distributed=False, distributed=given)).trainer
    assert off.distributed.initialize_jax_distributed is False and off.distributed.num_processes == 2


def test_attention_backend_and_recomputation_land_on_the_model(tmp_path):
    from levanter.layers.attention import AttentionBackend

    from marin_assets.training.levanter_config import build_levanter_config

    pod = _pod(tmp_path)
    spec = dataclasses.replace(pod.train_config, attn_backend="jax_flash", gradient_checkpointing=False)
    model = build_levanter_config(dataclasses.replace(pod, train_config=spec)).model
    assert model.attn_backend is AttentionBackend.JAX_FLASH and model.gradient_checkpointing is False
    default = build_levanter_config(pod).model  # None keeps the model config's own values
    assert default.attn_backend is None and default.gradient_checkpointing is True


def test_the_gpu_extra_pins_cuda_jax_at_the_training_jax_and_the_gpu_image_installs_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    jax_pin = next(p for p in extras["train"] if p.startswith("jax=="))
    assert f"jax[cuda12]=={jax_pin.split('==')[1]}" in extras["gpu"]
    dockerfile = (ROOT / "k8s" / "Dockerfile").read_text()
    cuda_case = dockerfile[dockerfile.index("cuda12)") : dockerfile.index(";;", dockerfile.index("cuda12)"))]
    assert '".[gpu]"' in cuda_case


def test_a_new_run_may_name_a_step_folder_a_checkpoints_folder_or_the_old_runs_output(tmp_path):
    from marin_assets.training.levanter_config import resolve_checkpoint_path

    run = tmp_path / "checkpoints" / "old-run-abc123"
    step = run / "checkpoints" / "step-79"
    step.mkdir(parents=True)
    (step / "metadata.json").write_text("{}")
    assert resolve_checkpoint_path(str(run)) == str(run / "checkpoints")  # Levanter discovers the newest
    assert resolve_checkpoint_path(str(run / "checkpoints")) == str(run / "checkpoints")
    assert resolve_checkpoint_path(str(step)) == str(step)
    assert resolve_checkpoint_path(str(tmp_path / "missing")) == str(tmp_path / "missing")
