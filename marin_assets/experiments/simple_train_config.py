"""Marin's ``experiments/simple_train_config.py``: the training settings ``default_train`` reads.

Same fields, order and defaults as Marin's ``SimpleTrainConfig``. Levanter types
(``IntSchedule``, ``OptimizerConfig``, ``WatchConfig``) are accepted as is; they are imported for type
checkers only, so that defining an experiment does not import Levanter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from marin_assets.execution.step import StepPath
from marin_assets.training.device_defaults import AttentionBackendName
from marin_resources.resource_config import ResourceConfig, TpuPodConfig

if TYPE_CHECKING:
    from levanter.callbacks.watch import WatchConfig
    from levanter.distributed import DistributedConfig
    from levanter.optim import OptimizerConfig
    from levanter.schedule import IntSchedule


@dataclass(frozen=True)
class SimpleTrainConfig:
    """Trainer and optimizer settings of a Marin training run (None: Levanter's default)."""

    resources: ResourceConfig
    train_batch_size: int | IntSchedule
    """Sequences per step (an int, or a Levanter ``IntSchedule``)."""
    num_train_steps: int
    learning_rate: float
    data_seed: int | None = None
    weight_decay: float | None = None
    beta1: float | None = None
    beta2: float | None = None
    epsilon: float | None = None
    max_grad_norm: float | None = None
    warmup: float | None = None
    decay: float | None = None
    rewarmup: float | None = None
    lr_schedule: str | None = None
    min_lr_ratio: float | None = None
    cycle_length: int | list[int] | None = None
    z_loss_weight: float | None = None
    ema_beta: float | None = None
    skip_bad_steps: bool = False
    steps_per_eval: int | None = None
    """How often to compute validation losses (None: every 1000 steps)."""
    steps_per_export: int = 10000
    """Keep a checkpoint every N steps."""
    steps_per_task_eval: int | None = None
    steps_per_hf_export: int | None = None
    """None: match ``steps_per_export``; -1 disables."""
    per_device_eval_parallelism: int | None = None
    max_eval_batches: int | None = None
    initialize_from_checkpoint_path: StepPath | None = None
    initialize_from_hf: str | None = None
    reset_data_loader_on_init: bool = True
    allow_partial_checkpoint: bool = False
    int8: bool = False
    optimizer_config: OptimizerConfig | None = None
    watch: WatchConfig | None = None
    train_seq_len: int | None = None
    """Training context length (None: the model's ``seq_len``)."""
    per_device_parallelism: int = -1
    pad_tokenizer_to_match_model: bool = False
    # Accelerator settings (Levanter's names; None: the device kind's default, docs/models.md). Not
    # part of a step's version unless the script versions them: they change speed, not the model.
    mp: str | None = None
    """Mixed precision, a jmp policy (``"p=f32,c=bfloat16"``); Levanter's ``trainer.mp``."""
    attn_backend: AttentionBackendName | None = None
    """Levanter's ``AttentionBackend`` by value: ``default``, ``nvte``, ``splash``, ``jax_flash``, ``vanilla``."""
    gradient_checkpointing: bool | str | None = None
    """Activation recomputation (the model's field; None keeps the model config's value)."""
    model_axis_size: int | None = None
    """Tensor-parallel (``model``) axis size; the data axis gets the remaining devices."""
    fsdp_axis: str | tuple[str, ...] | None = None
    """Model axes sharded over the data axis (FSDP; Levanter's default ``"embed"``)."""
    tensor_parallel_axes: tuple[str, ...] | None = None
    """Model axes sharded over the ``model`` axis."""
    replica_ici_axis_size: int | None = None
    """Data-parallel replicas within a slice."""
    replica_dcn_axis_size: int | None = None
    """Data-parallel replicas across slices."""
    jax_compilation_cache_dir: StepPath | None = None
    """Persistent compilation cache (None: ``$MARIN_JAX_COMPILATION_CACHE_DIR``, else beside the run's
    output; ``"off"``: none)."""
    xla_flags: tuple[str, ...] | None = None
    """Added to ``XLA_FLAGS`` of the training process (None: the device kind's defaults)."""
    distributed: DistributedConfig | None = None
    """Levanter's ``trainer.distributed`` (coordinator, process count/id, ``initialize_jax_distributed``)."""
    progress_timeout_s: float | None = None
    """Stop the run after this long without progress (None: two hours; 0: never;
    ``$MARIN_TRAIN_PROGRESS_TIMEOUT_S`` overrides)."""

    @property
    def tpu_type(self) -> str | None:
        """The TPU type of ``resources`` (None when not a TPU)."""
        return self.resources.tpu_type if isinstance(self.resources, TpuPodConfig) else None

    @property
    def node_count(self) -> int:
        """TPU slices (1 when not a TPU)."""
        return self.resources.slice_count if isinstance(self.resources, TpuPodConfig) else 1
