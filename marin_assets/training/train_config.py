"""The nested training config ``default_train`` writes, and a Llama shape -- no Levanter import.

:class:`LmTrainSpec` mirrors Levanter's ``TrainLmConfig`` layout; the training subprocess turns it
into Levanter's config (:func:`marin_assets.training.levanter_config.build_levanter_config`).
Experiments that must define steps without importing Levanter (the quickstart, the code location)
describe their model with :class:`LlamaModelConfig`. Shared by ``training`` (the step) and
``levanter_config`` (the builder), which do not import each other.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CHECKPOINTS_PATH = "checkpoints"
DEFAULT_HF_CHECKPOINTS_PATH = "hf"


@dataclass(frozen=True)
class LlamaModelConfig:
    """A Llama-architecture model (Levanter ``LlamaConfig`` names); defaults: the tiny CPU model (~0.66 M
    parameters)."""

    seq_len: int = 128
    hidden_dim: int = 64
    intermediate_dim: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    tie_word_embeddings: bool = False


TINY_LLAMA = LlamaModelConfig()


@dataclass(frozen=True)
class SourceSpec:
    """One tokenized cache of a mixture (Levanter's ``UrlDatasetSourceConfig`` names).

    ``cache_dir`` is a cache root, or a list of roots (a partitioned tokenize step: one per drop);
    ``train_urls`` / ``validation_urls`` are the documents the cache was built from (as in Marin, they
    are part of the version when they are step outputs; training reads only the cache).
    """

    cache_dir: Any
    format: Any = None
    train_urls: list[Any] = field(default_factory=list)
    validation_urls: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class MixtureSpec:
    """A data mixture (Levanter's ``LMMixtureDatasetConfig`` names); components without a weight
    are validation-only."""

    configs: Mapping[str, SourceSpec]
    train_weights: Mapping[str, float]
    tokenizer: Any = None
    shuffle: bool | int = True
    permutation_type: str | None = "feistel"


@dataclass(frozen=True)
class TrainerSpec:
    """Trainer settings (Levanter ``TrainerConfig`` names where they exist; None: Levanter's default)."""

    train_batch_size: Any
    num_train_steps: Any
    steps_per_eval: Any = 1000
    max_eval_batches: Any = None
    checkpoint_every: Any = 10000
    per_device_parallelism: Any = -1
    per_device_eval_parallelism: Any = None
    allow_partial_checkpoint: Any = False
    int8: Any = False
    ema_beta: Any = None
    watch: Any = None
    tags: tuple[str, ...] = ()
    wandb_name: str | None = None
    wandb_group: str | None = None


@dataclass(frozen=True)
class OptimizerSpec:
    """Optimizer settings (Levanter ``AdamConfig`` names; None: Levanter's default).

    ``optimizer_config`` (a Levanter ``OptimizerConfig``) replaces the AdamW built from the rest.
    """

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
    skip_bad_steps: Any = False
    optimizer_config: Any = None


@dataclass(frozen=True)
class LmTrainSpec:
    """What Levanter trains (Levanter ``TrainLmConfig`` layout), as ``default_train`` writes it."""

    data: Any
    trainer: TrainerSpec
    model: Any
    optimizer: OptimizerSpec
    train_seq_len: Any = None
    hf_save_steps: Any = None
    data_seed: Any = None
    z_loss_weight: Any = None
    initialize_from_hf: Any = None
    initialize_from_checkpoint_path: Any = None
    reset_data_loader_on_init: Any = True
    eval_harness_tasks: tuple[Any, ...] = ()
    """lm-eval tasks Levanter's harness runs during training (``EvalTaskConfig`` s or lm-eval names)."""
    eval_harness_steps: int = 10000


def accelerator_of(resources: Any) -> str:
    """``"cpu"``, ``"gpu"`` or ``"tpu"`` for any resources object this project knows (None: cpu)."""
    if resources is None:
        return "cpu"
    device = getattr(resources, "device", None)
    kinds = [type(resources).__name__.lower()] + ([type(device).__name__.lower()] if device is not None else [])
    for kind in kinds:
        for name in ("tpu", "gpu"):
            if kind.startswith(name):
                return name
    return "cpu"


def default_run_id(output_path: str) -> str:
    """A stable Levanter run id for ``output_path`` (same path -> same id -> resume)."""
    base = output_path.rstrip("/").rsplit("/", 1)[-1]
    return f"{base[:40]}-{hashlib.md5(output_path.encode()).hexdigest()[:8]}"


def use_wandb() -> bool:
    """True when W&B tracking is on: a key is set and W&B is not disabled."""
    return bool(os.environ.get("WANDB_API_KEY")) and os.environ.get("WANDB_MODE", "").lower() != "disabled"
