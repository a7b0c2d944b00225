"""Marin's ``marin.training.training``: ``TrainLmOnPodConfig`` and ``run_levanter_train_lm``.

``default_train`` builds a ``TrainLmOnPodConfig`` whose ``train_config`` mirrors the layout of
Levanter's ``TrainLmConfig`` (``data``, ``trainer``, ``model``, ``optimizer`` ...), so the version
keys of what a script versions are the ones Marin records (``train_config.model``,
``train_config.data.configs.<name>.cache_dir`` ...). The step function turns it into this
project's training config (``marin_assets.training.train_config.TrainConfig``) and runs Levanter the
way the quickstart does: a ``train_lm`` subprocess on local caches, a local tokenizer, no downloads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.step import unwrap_versioned_value


@dataclass(frozen=True)
class TrainerSettings:
    """The trainer part of the run (Levanter ``TrainerConfig`` names)."""

    train_batch_size: Any
    num_train_steps: Any
    steps_per_eval: Any = 1000
    max_eval_batches: Any = None
    checkpoint_every: Any = 10000
    tags: tuple[str, ...] = ()
    wandb_name: str | None = None
    wandb_group: str | None = None


@dataclass(frozen=True)
class OptimizerSettings:
    """The optimizer part of the run (Levanter ``AdamConfig`` names; None: Levanter's default)."""

    learning_rate: Any
    weight_decay: Any = None
    beta1: Any = None
    beta2: Any = None
    epsilon: Any = None
    max_grad_norm: Any = None
    warmup: Any = None
    decay: Any = None
    rewarmup: Any = None
    lr_schedule: Any = None
    min_lr_ratio: Any = None
    cycle_length: Any = None
    skip_bad_steps: bool = False


@dataclass(frozen=True)
class TrainLmConfig:
    """What Levanter trains: data mixture, trainer, model, optimizer."""

    data: Any
    trainer: TrainerSettings
    model: Any
    optimizer: OptimizerSettings
    train_seq_len: Any = None
    hf_save_steps: Any = None
    data_seed: Any = None
    z_loss_weight: Any = None
    initialize_from_hf: Any = None
    initialize_from_checkpoint_path: Any = None


@dataclass(frozen=True)
class TrainLmOnPodConfig:
    """A training run and where it runs."""

    train_config: TrainLmConfig
    resources: Any
    output_path: Any
    env_vars: dict[str, str] = field(default_factory=dict)


def _accelerator(resources: Any) -> str:
    descriptor = resources.accelerator_descriptor() if hasattr(resources, "accelerator_descriptor") else None
    if resources is None or type(resources).__name__ == "CpuOnlyConfig":
        return "cpu"
    if type(resources).__name__ == "TpuPodConfig":
        return "tpu"
    return "gpu" if descriptor is not None or type(resources).__name__ == "GpuConfig" else "cpu"


def to_train_config(config: TrainLmOnPodConfig) -> Any:
    """This project's ``TrainConfig`` for a resolved ``TrainLmOnPodConfig``."""
    from levanter.optim import AdamConfig

    from marin_assets.processing.tokenize import resolve_tokenizer
    from marin_assets.training.train_config import LlamaModelConfig, SimpleTrainConfig, TrainConfig

    train = config.train_config
    model = unwrap_versioned_value(train.model)
    data = train.data
    defaults = AdamConfig()
    opt = train.optimizer

    def pick(value: Any, default: Any) -> Any:
        value = unwrap_versioned_value(value)
        return default if value is None else value

    accelerator = _accelerator(config.resources)
    trainer = train.trainer
    env = dict((getattr(config.resources, "runtime_env", None) or {}).get("env_vars") or {})
    env.update(config.env_vars)
    return TrainConfig(
        output_path=config.output_path,
        components={name: source.cache_dir for name, source in data.configs.items()},
        weights={name: float(w) for name, w in data.train_weights.items()},
        model=LlamaModelConfig(
            seq_len=pick(train.train_seq_len, model.seq_len),
            hidden_dim=model.hidden_dim,
            intermediate_dim=model.intermediate_dim,
            num_layers=model.num_layers,
            num_heads=model.num_heads,
            num_kv_heads=model.num_kv_heads,
            tie_word_embeddings=bool(getattr(model, "tie_word_embeddings", False)),
        ),
        train=SimpleTrainConfig(
            train_batch_size=int(pick(trainer.train_batch_size, 32)),
            num_train_steps=int(pick(trainer.num_train_steps, 1)),
            learning_rate=float(pick(opt.learning_rate, defaults.learning_rate)),
            weight_decay=float(pick(opt.weight_decay, defaults.weight_decay)),
            warmup=float(pick(opt.warmup, defaults.warmup)),
            min_lr_ratio=float(pick(opt.min_lr_ratio, defaults.min_lr_ratio)),
            lr_schedule=str(pick(opt.lr_schedule, defaults.lr_schedule)),
            steps_per_checkpoint=int(pick(trainer.checkpoint_every, 10000)),
            steps_per_eval=int(pick(trainer.steps_per_eval, 1000)),
            steps_per_hf_export=pick(train.hf_save_steps, None),
            max_eval_batches=pick(trainer.max_eval_batches, None),
            mp="p=f32,c=f32" if accelerator == "cpu" else "p=f32,c=bfloat16",
            seed=int(pick(train.data_seed, 0)),
            shuffle=bool(data.shuffle),
        ),
        tokenizer=resolve_tokenizer(data.tokenizer),
        tags=tuple(trainer.tags),
        accelerator=accelerator,
        env=env,
    )


def run_levanter_train_lm(config: TrainLmOnPodConfig) -> dict[str, Any]:
    """Train with Levanter into ``config.output_path`` (resumes from its checkpoints)."""
    from marin_assets.training.levanter_train import run_training

    return run_training(to_train_config(config))
