"""Resources of marin-dagster: storage, Ray, accelerators.

Submodules without Dagster (``ray_head``, ``ray_connect``, ``ray_jobs``, ``accelerators``, ``storage``) are used by the step
engine; the Dagster ``ConfigurableResource`` wrappers live in ``dagster_resources``. This package
never imports ``marin_assets``.
"""

# Marin's ``marin.resources`` names, so ``from marin.resources import ...`` maps to this package.
from marin_resources.resource_config import (  # noqa: E402
    CpuOnlyConfig,
    GpuConfig,
    ResourceConfig,
    TpuPodConfig,
    remove_tpu_lockfile_on_exit,
)

__all__ = ["CpuOnlyConfig", "GpuConfig", "ResourceConfig", "TpuPodConfig", "remove_tpu_lockfile_on_exit"]
