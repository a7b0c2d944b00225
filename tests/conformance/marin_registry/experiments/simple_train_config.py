from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SimpleTrainConfig:
    resources: Any
    train_batch_size: int | list | None = None
    num_train_steps: int | None = None
    learning_rate: float | None = None
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
    steps_per_export: int = 10000
    steps_per_task_eval: int | None = None
    steps_per_hf_export: int | None = None
    per_device_parallelism: int = -1
    per_device_eval_parallelism: int | None = None
    max_eval_batches: int | None = None
    initialize_from_checkpoint_path: str | None = None
    initialize_from_hf: str | None = None
    reset_data_loader_on_init: bool = True
    allow_partial_checkpoint: bool = False
    int8: bool = False
    optimizer_config: Any | None = None
    watch: Any = None
    train_seq_len: int | None = None
