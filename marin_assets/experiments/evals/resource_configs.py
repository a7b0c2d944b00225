"""Marin's ``experiments/evals/resource_configs.py``: the resource configs evaluation steps name.

Same names as Marin's (chips per task, TPU type, placement strategy and whether the slice's head is
scheduled, as Marin's ``ResourceConfig(num_tpu, tpu_type, strategy, include_head_in_scheduling_strategy)``
presets say). A step given a TPU config goes to Ray with that request: defining it checks nothing,
and running it needs a TPU in the cluster (without one the step fails when it runs, naming the
request). On this project's CPU machines pass ``CpuOnlyConfig()`` (``default_eval``'s default here).
"""

from __future__ import annotations

from marin_resources.resource_config import CpuOnlyConfig, ResourceConfig, TpuPodConfig

# Marin's presets: (chips, TPU type, Ray placement strategy, whether the head is scheduled too).
TPU_V4_8 = TpuPodConfig(tpu_type="v4-8", chip_count=4, packing_strategy="STRICT_PACK")
SINGLE_TPU_V4_8 = TpuPodConfig(tpu_type="v4-8")
SINGLE_TPU_V4_16 = TpuPodConfig(tpu_type="v4-16", chip_count=2, packing_strategy="STRICT_PACK")
SINGLE_TPU_V5p_8 = TpuPodConfig(tpu_type="v5p-8", packing_strategy="STRICT_PACK")
SINGLE_TPU_V5p_8_FULL = TpuPodConfig(
    tpu_type="v5p-8", chip_count=4, packing_strategy="STRICT_PACK", include_tpu_head=True
)
SINGLE_TPU_V6E_8 = TpuPodConfig(tpu_type="v6e-8")
TPU_V6E_8_STRICT_PACK = TpuPodConfig(tpu_type="v6e-8", chip_count=8, packing_strategy="STRICT_PACK")
TPU_V4_16_STRICT_PACK = TpuPodConfig(tpu_type="v4-16", chip_count=8, packing_strategy="PACK")
CPU_ONLY = CpuOnlyConfig(num_cpus=1)

__all__ = [
    "CPU_ONLY",
    "SINGLE_TPU_V4_8",
    "SINGLE_TPU_V4_16",
    "SINGLE_TPU_V5p_8",
    "SINGLE_TPU_V5p_8_FULL",
    "SINGLE_TPU_V6E_8",
    "TPU_V4_8",
    "TPU_V4_16_STRICT_PACK",
    "TPU_V6E_8_STRICT_PACK",
    "ResourceConfig",
]
