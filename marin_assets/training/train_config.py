"""The training configs experiments write (frozen, versioned); mapped to Levanter's in ``levanter_config``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------------------------
# Our small configs (what experiments write) -- mapped to Levanter's config classes below.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlamaModelConfig:
    """A Llama-architecture model; the defaults are the tiny CPU model (~0.66 M parameters)."""

    seq_len: int = 128
    hidden_dim: int = 64
    intermediate_dim: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    tie_word_embeddings: bool = False


TINY_LLAMA = LlamaModelConfig()


@dataclass(frozen=True)
class SimpleTrainConfig:
    """Trainer and optimizer settings.

    Attributes:
        train_batch_size: sequences per step.
        num_train_steps: optimizer steps.
        learning_rate / weight_decay / warmup / min_lr_ratio / lr_schedule: AdamW with a schedule.
        steps_per_checkpoint: keep a checkpoint every N steps (also the resume granularity).
        steps_per_eval: evaluate on the validation caches every N steps.
        steps_per_hf_export: HF export every N steps (None: only at the end).
        max_eval_batches: cap on eval batches per validation set (None: all).
        mp: Levanter/jmp mixed-precision policy (``p=f32,c=bfloat16`` on accelerators).
        seed: model/data seed.
        shuffle: shuffle each cache (linear permutation).
    """

    train_batch_size: int = 32
    num_train_steps: int = 200
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    warmup: float = 0.05
    min_lr_ratio: float = 0.1
    lr_schedule: str = "cosine"
    steps_per_checkpoint: int = 100
    steps_per_eval: int = 100
    steps_per_hf_export: int | None = None
    max_eval_batches: int | None = 8
    mp: str = "p=f32,c=f32"
    seed: int = 0
    shuffle: bool = True


DEFAULT_TRAIN_CONFIG = SimpleTrainConfig()


@dataclass(frozen=True)
class MixtureData:
    """Tokenized caches with mixing weights (Marin's ``lm_mixture_data_config``).

    ``components`` maps a name to a tokenized step / ``InputName`` / cache path, or to a partitioned
    step's ``.partitions()`` (a list of caches, one per drop; the component's weight is then shared
    among drops in proportion to their tokens). ``weights`` may omit components: they are then
    validation-only (weight 0).
    """

    components: Mapping[str, Any]
    weights: Mapping[str, float]


def lm_mixture_data_config(components: Mapping[str, Any], weights: Mapping[str, float]) -> MixtureData:
    """A training mixture over tokenized caches (see :class:`MixtureData`)."""
    unknown = set(weights) - set(components)
    if unknown:
        raise ValueError(f"weights for unknown components: {sorted(unknown)}")
    if not any(w > 0 for w in weights.values()):
        raise ValueError("at least one component needs a positive weight")
    return MixtureData(dict(components), dict(weights))


@dataclass(frozen=True)
class TrainConfig:
    """Config of :func:`run_training` (placeholders resolved by the engine).

    Attributes:
        output_path: the step output.
        components: name -> cache root path, or list of cache roots (partitions).
        weights: name -> mixture weight (missing: 0, validation only).
        model: model shape.
        train: trainer/optimizer settings.
        tokenizer: tokenizer dir; None reads it from the first cache's ledger.
        run_id: Levanter run id; None derives it from the output path (stable across reruns).
        tags: tracker tags.
        eval_harness_tasks: lm-eval tasks recorded for the eval step (evaluation runs there).
        use_default_validation: evaluate on the validation splits of the caches during training.
        in_process: run ``train_lm.main`` in this process instead of a subprocess.
        accelerator: ``"cpu"`` pins JAX to CPU; ``"gpu"``/``"tpu"`` let JAX pick the device and
            make Levanter require one (set by ``default_train`` from ``resources``).
        timeout_s: kill the subprocess after this long.
        env: extra environment variables for the training process.
    """

    output_path: str
    components: Mapping[str, str | Sequence[str]]
    weights: Mapping[str, float]
    model: LlamaModelConfig = TINY_LLAMA
    train: SimpleTrainConfig = SimpleTrainConfig()
    tokenizer: str | None = None
    run_id: str | None = None
    tags: tuple[str, ...] = ()
    eval_harness_tasks: tuple[str, ...] = ()
    use_default_validation: bool = True
    in_process: bool = False
    accelerator: str = "cpu"
    timeout_s: float = 6 * 3600.0
    env: Mapping[str, str] = field(default_factory=dict)
