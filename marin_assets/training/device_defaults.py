"""Accelerator settings a training run gets when its config leaves them unset, per device kind.

One table, read by the step (the training process's environment: ``XLA_FLAGS``, the progress
limit) and by the config builder in the training subprocess (precision, attention, recomputation,
``jax.distributed``, the compilation cache). ``docs/models.md`` shows it and says which entries were
measured: only the GPU figures of ``../shared/gpu/`` (one H100, the ``llama_300m`` shape) are GPU
measurements; the TPU entries are Levanter's own defaults, kept as they are.

Nothing here imports JAX or Levanter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from marin_assets.execution.storage import join_path

DeviceKind = Literal["cpu", "gpu", "tpu"]
AttentionBackendName = Literal["default", "nvte", "splash", "jax_flash", "vanilla"]
"""The values of Levanter's ``levanter.layers.attention.AttentionBackend``."""

PROGRESS_TIMEOUT_ENV = "MARIN_TRAIN_PROGRESS_TIMEOUT_S"
DEFAULT_PROGRESS_TIMEOUT_S = 2 * 3600.0
COMPILATION_CACHE_ENV = "MARIN_JAX_COMPILATION_CACHE_DIR"
COMPILATION_CACHE_FOLDER = ".jax_compilation_cache"
OFF = "off"


@dataclass(frozen=True)
class DeviceDefaults:
    """What a run on one device kind gets for each knob left at None. Attention backend and
    activation recomputation are not here: left at None they keep the model config's own values
    (Levanter: ``AttentionBackend.DEFAULT``, recomputation on), which is what was measured."""

    mp: str
    """Levanter's ``trainer.mp`` (a jmp policy: parameters and compute dtypes)."""
    initialize_jax_distributed: bool | None
    """False: never call ``jax.distributed.initialize`` (one host); None: Levanter detects the cluster."""
    xla_flags: tuple[str, ...]


DEVICE_DEFAULTS: dict[str, DeviceDefaults] = {
    # CPU: f32 compute (bf16 matmuls are emulated and slow on CPU); one process.
    "cpu": DeviceDefaults("p=f32,c=f32", False, ()),
    # GPU (one node): measured on one H100 (../shared/gpu): bf16 compute, recomputation on (6% faster
    # than off, 13.4 instead of 65 GiB). jax.distributed is not initialized: Levanter's cluster
    # detection calls it without a coordinator when mpi4py is importable.
    "gpu": DeviceDefaults("p=f32,c=bfloat16", False, ()),
    # TPU slices: Levanter's defaults; jax.distributed auto-detected from the TPU environment, which
    # multi-host slices need. Not measured here.
    "tpu": DeviceDefaults("p=f32,c=bfloat16", None, ()),
}


def defaults_for(kind: str) -> DeviceDefaults:
    """The defaults of device kind ``kind`` (``cpu``, ``gpu`` or ``tpu``)."""
    try:
        return DEVICE_DEFAULTS[kind]
    except KeyError:
        raise ValueError(f"unknown device kind {kind!r}: expected one of {sorted(DEVICE_DEFAULTS)}") from None


def progress_timeout_s(configured: float | None) -> float | None:
    """Seconds without progress after which a training process is stopped; None: never.

    ``$MARIN_TRAIN_PROGRESS_TIMEOUT_S`` overrides the config (an operator raises the limit of a
    deployment without editing scripts); then the config's value; then two hours. 0 turns it off.
    """
    raw = os.environ.get(PROGRESS_TIMEOUT_ENV, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"${PROGRESS_TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    else:
        value = DEFAULT_PROGRESS_TIMEOUT_S if configured is None else float(configured)
    if value < 0:
        raise ValueError(f"the training progress timeout must be >= 0 seconds (0: off), got {value}")
    return value or None


def compilation_cache_dir(configured: str | None, run_output: str) -> str | None:
    """Where JAX keeps compiled programs across attempts, resumes and takeovers; None: no cache.

    The config's value, else ``$MARIN_JAX_COMPILATION_CACHE_DIR``, else a folder beside the run's
    published output (``<parent>/.jax_compilation_cache``): every host of the run reaches it (it may
    be ``gs://``), and runs in the same folder share it. ``"off"`` turns the cache off.
    """
    value = configured if configured is not None else os.environ.get(COMPILATION_CACHE_ENV) or None
    if value is None:
        parent = run_output.rstrip("/").rsplit("/", 1)[0]
        return join_path(parent, COMPILATION_CACHE_FOLDER)
    return None if value.strip().lower() == OFF else value


def xla_flags_env(existing: str | None, flags: tuple[str, ...]) -> str | None:
    """``XLA_FLAGS`` with ``flags`` appended to what the environment already sets (None: unset)."""
    parts = [existing.strip()] if existing and existing.strip() else []
    parts += [flag for flag in flags if flag not in parts]
    return " ".join(parts) or None
