"""What ``default_train`` writes for Levanter's ``TrainLmConfig`` -- typed, in Levanter's layout, without
importing Levanter -- and a Llama shape.

:class:`LmTrainSpec` and its parts mirror Levanter's classes (``TrainLmConfig``, ``TrainerConfig``,
``AdamConfig``, ``LMMixtureDatasetConfig``, ``UrlDatasetSourceConfig``): a field has Levanter's name and
type, so ``default_train`` is the one place where ``SimpleTrainConfig`` is mapped onto Levanter, and the
training subprocess copies the spec into Levanter's classes by field name
(:func:`marin_assets.training.levanter_config.build_levanter_config`) without naming any field again.
Each spec class names its Levanter class (``LEVANTER``) and lists in ``OURS`` the few fields that are
settings of ours, with where they land; ``tests/models/test_train_config_parity.py`` checks every
other field against Levanter's dataclass (name and type). The layout is also the version layout: a
value the script wrapped in ``versioned`` is recorded under Levanter's path, as Marin records it
(``train_config.optimizer.learning_rate``). Every field may hold such a ``versioned`` value.

Experiments that must define steps without importing Levanter (the quickstart, the code location)
describe their model with :class:`LlamaModelConfig`. Shared by ``training`` (the step) and
``levanter_config`` (the builder), which do not import each other.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from marin_assets.training.device_defaults import AttentionBackendName

if TYPE_CHECKING:  # Levanter's types, for readers and type checkers only (no import at run time)
    from levanter.callbacks.watch import WatchConfig
    from levanter.data.text import LmDatasetFormatBase, LMMixtureDatasetConfig
    from levanter.distributed import DistributedConfig
    from levanter.models.lm_model import LmConfig
    from levanter.optim import OptimizerConfig
    from levanter.schedule import ScheduleStep

    from marin_assets.eval_data.task_data import EvalTask
    from marin_assets.execution.step import StepPath

DEFAULT_CHECKPOINTS_PATH = "checkpoints"
DEFAULT_HF_CHECKPOINTS_PATH = "hf"


@dataclass(frozen=True)
class LlamaModelConfig:
    """A Llama-architecture model (Levanter ``LlamaConfig`` names); defaults: the tiny CPU model (~0.66 M
    parameters)."""

    LEVANTER: ClassVar[str] = "levanter.models.llama:LlamaConfig"
    OURS: ClassVar[Mapping[str, str]] = {}

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
    """One tokenized cache of a mixture (Levanter's ``UrlDatasetSourceConfig``).

    ``cache_dir`` is a cache root, or a list of roots (a partitioned tokenize step: one per drop);
    ``train_urls`` / ``validation_urls`` are the documents the cache was built from (as in Marin, they
    are part of the version when they are step outputs; training reads only the cache).
    """

    LEVANTER: ClassVar[str] = "levanter.data.text:UrlDatasetSourceConfig"
    OURS: ClassVar[Mapping[str, str]] = {"cache_dir": "cache_dir; a list of roots becomes one component per root"}

    cache_dir: StepPath | list[StepPath]
    format: LmDatasetFormatBase | None = None
    train_urls: list[StepPath] = field(default_factory=list)
    validation_urls: list[StepPath] = field(default_factory=list)


@dataclass(frozen=True)
class MixtureSpec:
    """A data mixture (Levanter's ``LMMixtureDatasetConfig``); components without a weight are
    validation-only. ``tokenizer`` None: read from the caches' ledgers when training starts."""

    LEVANTER: ClassVar[str] = "levanter.data.text:LMMixtureDatasetConfig"
    OURS: ClassVar[Mapping[str, str]] = {}

    configs: Mapping[str, SourceSpec]
    train_weights: Mapping[str, float]
    tokenizer: StepPath | None = None
    shuffle: bool | int = True
    permutation_type: Literal["feistel", "linear"] | None = "feistel"


@dataclass(frozen=True)
class TrainerSpec:
    """Levanter's ``TrainerConfig`` settings a training step chooses (None: Levanter's default); where
    the run goes (ids, paths, precision, trackers) is added in the training subprocess."""

    LEVANTER: ClassVar[str] = "levanter.trainer:TrainerConfig"
    OURS: ClassVar[Mapping[str, str]] = {
        "checkpoint_every": "checkpointer.keep = [{every: N}]",
        "int8": "quantization = QuantizationConfig(int8=True)",
        "ema_beta": "model_averaging = EmaModelAveragingConfig(beta)",
        "tags": "tracker: WandbConfig.tags (when W&B is on)",
        "wandb_name": "tracker: WandbConfig.name (when W&B is on)",
        "wandb_group": "tracker: WandbConfig.group (when W&B is on)",
        "mp": "mp = jmp.get_policy(mp) (None: the device kind's default, device_defaults.py)",
        "initialize_jax_distributed": "distributed.initialize_jax_distributed (None: the device kind's default)",
        "xla_flags": "XLA_FLAGS of the training process (None: the device kind's default)",
    }

    train_batch_size: int | list[ScheduleStep[int]]
    num_train_steps: int
    steps_per_eval: int = 1000
    max_eval_batches: int | None = None
    per_device_parallelism: int = -1
    per_device_eval_parallelism: int | None = None
    allow_partial_checkpoint: bool = False
    watch: WatchConfig | None = None
    checkpoint_every: int = 10000
    int8: bool = False
    ema_beta: float | None = None
    tags: tuple[str, ...] = ()
    wandb_name: str | None = None
    wandb_group: str | None = None
    mp: str | None = None
    """Mixed precision, a jmp policy such as ``"p=f32,c=bfloat16"``."""
    model_axis_size: int | None = None
    """Devices per tensor-parallel (``model``) group; the data axis gets the rest."""
    fsdp_axis: str | tuple[str, ...] | None = None
    """Model axes sharded over the data axis (FSDP); Levanter's default ``"embed"``."""
    tensor_parallel_axes: tuple[str, ...] | None = None
    """Model axes sharded over the ``model`` axis (e.g. ``("mlp", "heads")``)."""
    replica_ici_axis_size: int | None = None
    """Data-parallel replicas within a slice (parameters copied, not sharded, across them)."""
    replica_dcn_axis_size: int | None = None
    """Data-parallel replicas across slices (multislice)."""
    jax_compilation_cache_dir: StepPath | None = None
    """Persistent JAX compilation cache (None: beside the run's output; ``"off"``: none)."""
    distributed: DistributedConfig | None = None
    """Levanter's ``jax.distributed`` settings (coordinator, process count and id)."""
    initialize_jax_distributed: bool | None = None
    """False: never call ``jax.distributed.initialize`` (e.g. a GPU host with mpi4py importable)."""
    xla_flags: tuple[str, ...] | None = None
    """Flags added to ``XLA_FLAGS`` of the training process (``()``: none)."""


@dataclass(frozen=True)
class OptimizerSpec:
    """Levanter's ``AdamConfig`` settings (None: Levanter's default).

    ``optimizer_config`` (any Levanter ``OptimizerConfig``) replaces the AdamW built from the rest.
    """

    LEVANTER: ClassVar[str] = "levanter.optim:AdamConfig"
    OURS: ClassVar[Mapping[str, str]] = {"optimizer_config": "replaces the whole optimizer"}

    learning_rate: float
    weight_decay: float | None = None
    beta1: float | None = None
    beta2: float | None = None
    epsilon: float | None = None
    max_grad_norm: float | None = None
    warmup: int | float | None = None
    decay: int | float | None = None
    rewarmup: int | float | None = None
    lr_schedule: str | None = None
    min_lr_ratio: float | None = None
    cycle_length: int | float | list[int] | None = None
    skip_bad_steps: bool = False
    optimizer_config: OptimizerConfig | None = None


@dataclass(frozen=True)
class LmTrainSpec:
    """What Levanter trains (Levanter's ``TrainLmConfig``), as ``default_train`` writes it."""

    LEVANTER: ClassVar[str] = "levanter.main.train_lm:TrainLmConfig"
    OURS: ClassVar[Mapping[str, str]] = {
        "train_seq_len": "model.seq_len (the versioned model itself is unchanged)",
        "reset_data_loader_on_init": "False: initialize_from_checkpoint_path goes to trainer.initialize_from",
        "eval_harness_tasks": "eval_harness = LmEvalHarnessConfig(task_spec=...)",
        "attn_backend": "model.attn_backend = AttentionBackend(value) (None: the device kind's default)",
        "gradient_checkpointing": "model.gradient_checkpointing (None: the device kind's default)",
    }
    KEEP_NONE: ClassVar[frozenset[str]] = frozenset({"hf_save_steps"})
    """Fields where None is a setting, not "Levanter's default" (no HF export)."""

    data: MixtureSpec | LMMixtureDatasetConfig
    trainer: TrainerSpec
    model: LmConfig | LlamaModelConfig
    optimizer: OptimizerSpec
    train_seq_len: int | None = None
    hf_save_steps: int | None = None
    data_seed: int | None = None
    z_loss_weight: float | None = None
    initialize_from_hf: str | None = None
    initialize_from_checkpoint_path: StepPath | None = None
    reset_data_loader_on_init: bool = True
    eval_harness_tasks: tuple[EvalTask | str, ...] = ()
    """lm-eval tasks Levanter's harness runs during training (``EvalTaskConfig`` s or lm-eval names)."""
    eval_harness_steps: int = 10000
    attn_backend: AttentionBackendName | None = None
    """Levanter's ``AttentionBackend`` by value: ``default``, ``nvte``, ``splash``, ``jax_flash``, ``vanilla``."""
    gradient_checkpointing: bool | str | None = None
    """Activation recomputation (Levanter's ``ScanCheckpointPolicy`` names, e.g. ``"offload"``, are accepted)."""


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
