"""Dagster resources: the storage root and the shared Ray cluster.

Thin ``ConfigurableResource`` wrappers over the Dagster-free modules (``storage``, ``ray_connect``,
``accelerators``, ``runtime_env``) that the step engine also uses directly.

Why not ``dagster-ray`` (0.4.x): its ``LocalRay`` resource calls ``ray.init()`` in every step process,
and under the multiprocess executor / ``dagster dev`` the second step then attaches to the first
step's cluster and rejects its ``num_cpus``; its ``RayResource`` base only connects and disconnects
around a run. What this resource needs lives in the Dagster-free engine, which also runs without
Dagster (``executor_main``): one embedded head per machine, closed (loopback and token) and healed
(``ray_head``), Ray Client retries and the driver's job record for the dashboard links
(``ray_connect``, ``ray_jobs``), the lease fencing that cancels a step's task when its lease is lost
(``execution.ray_launch``), and the progress relay (``progress``). Built on ``dagster-ray`` it would
still wrap the same engine functions, plus a second connection lifecycle to keep consistent; so this
stays a thin wrapper. A remote cluster (KubeRay) is reached through ``address``/``$RAY_ADDRESS``.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

from marin_resources.ray_config import RayClusterConfig
from marin_resources.ray_connect import ensure_ray, set_default_config
from marin_resources.storage import StorageConfig


class MarinStorageResource(dg.ConfigurableResource):
    """Root of Marin outputs (``<prefix>/<step>-<hash>``).

    ``prefix``: local folder or fsspec URL (``gs://bucket/marin``), or ``dg.EnvVar("MARIN_PREFIX")``
    (resolved when a run starts, never when the code location loads); None means ``$MARIN_PREFIX``
    as the run finds it, else ``./data`` as an absolute path. A deployment sets it in its
    definitions or environment; one run sets it in its run config
    (``resources: {marin_storage: {config: {prefix: ...}}}``). :meth:`root` is the resolved prefix
    a step writes under. Credentials come from the environment (workload identity on GKE), never
    from resource config.
    """

    prefix: str | None = Field(
        default=None,
        description="Local folder or fsspec URL (or {env: VAR}, read when the run starts); None: $MARIN_PREFIX or ./data",
    )

    def storage(self) -> StorageConfig:
        """The Dagster-free storage config (validated)."""
        return StorageConfig(prefix=self.prefix)

    def root(self) -> str:
        """The normalised prefix of this run: absolute path or ``proto://...`` (``$MARIN_PREFIX`` is
        read now when no prefix is configured)."""
        return self.storage().root

    def url(self, *parts: str) -> str:
        """``<root>/<parts...>``."""
        return self.storage().url(*parts)

    def filesystem(self) -> Any:
        """fsspec filesystem of the root."""
        return self.storage().filesystem()

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # Validate early so that a bad prefix fails the step before any work, with a clear message.
        self.storage().ensure_root()


class RayResource(dg.ConfigurableResource):
    """The Ray cluster steps run on.

    No ``address`` and no ``$RAY_ADDRESS``: the machine-shared embedded local Ray (started by the
    first process that needs it, then reused by every step process, ``dagster dev`` and
    ``executor_main``). Otherwise: connect to that address (``ray://head:10001``, ``head:6379``,
    ``auto``).

    Connecting is lazy (``connect()``), so steps that never touch Ray pay nothing. Setup
    also makes this config the process default of ``ensure_ray()``, which the step engine
    calls.
    """

    address: str | None = Field(default=None, description="Ray address; None: $RAY_ADDRESS or embedded local Ray")
    num_cpus: int | None = Field(default=None, description="Logical CPUs of the embedded Ray (None: max(8, cores))")
    namespace: str = Field(default="marin", description="Ray namespace")
    include_dashboard: bool = Field(default=False, description="Start the dashboard with the embedded Ray (~1 GB)")
    runtime_env: dict[str, Any] = Field(default_factory=dict, description="Default runtime_env of the driver/tasks")
    resources: dict[str, float] = Field(
        default_factory=dict, description="Custom resources of the embedded Ray (e.g. fake TPU labels in tests)"
    )
    temp_dir: str | None = Field(default=None, description="Temp dir of the embedded Ray (None: $MARIN_RAY_TMPDIR)")

    def cluster_config(self) -> RayClusterConfig:
        """The Dagster-free config for ``ray_connect``."""
        return RayClusterConfig(
            address=self.address,
            num_cpus=self.num_cpus,
            resources=dict(self.resources),
            namespace=self.namespace,
            include_dashboard=self.include_dashboard,
            temp_dir=self.temp_dir,
            runtime_env=dict(self.runtime_env),
        )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        set_default_config(self.cluster_config())

    def connect(self) -> dict[str, float]:
        """Connect this process (starting the shared embedded Ray if needed); return cluster resources."""
        return ensure_ray(self.cluster_config())

    def address_in_use(self) -> str:
        """The GCS address of the cluster this process is connected to (connects first)."""
        import ray

        self.connect()
        return ray.get_runtime_context().gcs_address
