"""How to reach Ray: the config that both the embedded head (:mod:`marin_resources.ray_head`) and
the connecting side (:mod:`marin_resources.ray_connect`) read, kept below both so neither imports
the other for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RayClusterConfig:
    """How to reach Ray.

    Attributes:
        address: ``ray://host:10001``, ``host:6379`` or ``auto``; None means ``$RAY_ADDRESS`` if
            set, else an embedded local cluster shared by every process of this machine.
        num_cpus: logical CPUs of the embedded cluster (None: max(8, cores) -- more logical CPUs
            than cores avoids the Levanter cache-builder deadlock on small machines).
        resources: extra custom resources of the embedded cluster (e.g. fake TPU labels in tests).
        namespace: Ray namespace for named actors.
        include_dashboard: the dashboard costs ~1 GB of memory, so it is off by default.
        temp_dir: Ray's temp dir for the embedded cluster (None: ``$MARIN_RAY_TMPDIR`` or
            ``/tmp/marin-ray-<uid>``).
        object_store_memory: bytes for the embedded object store (None: Ray's default).
        runtime_env: default runtime env of the driver.
    """

    address: str | None = None
    num_cpus: int | None = None
    resources: dict[str, float] = field(default_factory=dict)
    namespace: str = "marin"
    include_dashboard: bool = False
    temp_dir: str | None = None
    object_store_memory: int | None = None
    runtime_env: dict[str, Any] = field(default_factory=dict)
