"""Marin's ``experiments/evals/resource_configs.py``: the resource configs evaluation steps name.

Same names as Marin's. A step given a TPU config goes to Ray with that request (a TPU must exist in
the cluster); on this project's CPU machines pass ``CpuOnlyConfig()`` (``default_eval``'s default here).
"""

from __future__ import annotations

from marin_resources.resource_config import CpuOnlyConfig, ResourceConfig, TpuPodConfig

SINGLE_TPU_V4_8 = TpuPodConfig(tpu_type="v4-8")
SINGLE_TPU_V6E_8 = TpuPodConfig(tpu_type="v6e-8")
CPU_ONLY = CpuOnlyConfig(num_cpus=1)

__all__ = ["CPU_ONLY", "SINGLE_TPU_V4_8", "SINGLE_TPU_V6E_8", "ResourceConfig"]
