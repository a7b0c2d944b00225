"""Marin's resource configs: ``ResourceConfig`` (fray's, with ``with_cpu()`` / ``with_gpu()`` /
``with_tpu()``) and ``marin.resources``'s ``CpuOnlyConfig``, ``GpuConfig``, ``TpuPodConfig``
(``GpuConfig`` is :class:`marin_resources.accelerators.GpuConfig`, re-exported).

A Marin script says ``SimpleTrainConfig(resources=TpuPodConfig(tpu_type="v4-128"))``; with the import
mapping ``marin.resources`` -> ``marin_resources`` it gets these classes, with Marin's field names,
defaults and methods (``as_remote_kwargs()``, ``accelerator_descriptor()``, ``with_env_vars()``,
``total_device_count()``). Each also has ``launch(fn, config, runtime_env=None)``, so the step
engine runs a step that carries one exactly like a step with one of our accelerator configs
(``marin_resources.accelerators``): these classes only translate Marin's names into ours.

TPU work runs inside :func:`remove_tpu_lockfile_on_exit`, as in Marin: libtpu leaves
``/tmp/libtpu_lockfile`` behind when a process exits, and the next TPU task on that host then
fails to open the device.

No Dagster import, no ``marin_assets`` import. Ray is imported only when a task is launched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from marin_resources.accelerators import CpuConfig, GpuConfig, TpuConfig, merged_runtime_env, tpu_topology

logger = logging.getLogger(__name__)

TPU_LOCKFILE = "/tmp/libtpu_lockfile"


@contextlib.contextmanager
def _lockfile_removed_on_exit(lockfile: str) -> Iterator[None]:
    try:
        yield
    finally:
        try:
            os.unlink(lockfile)
            logger.info("removed %s", lockfile)
        except FileNotFoundError:
            pass
        except OSError as exc:  # another user's file: report, do not mask the task's own outcome
            logger.warning("could not remove %s: %s", lockfile, exc)


def remove_tpu_lockfile_on_exit(fn: Any = None, *, lockfile: str = TPU_LOCKFILE) -> Any:
    """Remove libtpu's lockfile when the block or the function ends, however it ends (Marin's helper).

    As in Marin, ``with remove_tpu_lockfile_on_exit(): ...`` is a context manager and
    ``@remove_tpu_lockfile_on_exit`` a decorator; ``remove_tpu_lockfile_on_exit("/path")`` (or
    ``lockfile=``) names another lockfile.
    """
    if fn is None or isinstance(fn, (str, os.PathLike)):
        return _lockfile_removed_on_exit(os.fspath(fn) if fn is not None else lockfile)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _lockfile_removed_on_exit(lockfile):
            return fn(*args, **kwargs)

    return wrapper


def removing_tpu_lockfile(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` wrapped in :func:`remove_tpu_lockfile_on_exit` (a plain function: Ray needs one)."""
    return remove_tpu_lockfile_on_exit(fn)


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(size: str | int) -> int:
    """Bytes of a size such as ``"128m"``, ``"16g"``, ``"512Mi"`` or ``1024``.

    Raises:
        ValueError: naming the size it cannot read.
    """
    if isinstance(size, int):
        return size
    text = str(size).strip().lower().removesuffix("ib").removesuffix("i").removesuffix("b")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in _UNITS else (text, "")
    try:
        return int(float(number) * _UNITS[unit])
    except ValueError as exc:
        raise ValueError(f"cannot read the size {size!r} (want e.g. '128m', '16g')") from exc


DeviceConfig = CpuConfig | GpuConfig | TpuConfig
"""A device of :class:`ResourceConfig`: fray's ``CpuConfig`` / ``GpuConfig`` / ``TpuConfig``, here the
accelerator configs of :mod:`marin_resources.accelerators` (``TpuConfig.tpu_type`` is fray's ``type``)."""


@dataclass(frozen=True)
class ResourceConfig:
    """Marin's newer (fray) resource request: ``ResourceConfig.with_cpu()``, ``.with_gpu("H100", 8)``,
    ``.with_tpu("v4-8")``; with the import mapping ``fray.cluster`` -> ``marin_resources`` a script's
    ``from fray.cluster import ResourceConfig`` gets this class.

    Fields and defaults are fray's. It is a step's ``resources`` (and a ``TrainLmOnPodConfig``'s)
    like every config here: :meth:`launch` runs ``fn(config)`` as a Ray task with ``cpu`` CPUs and
    ``ram`` memory (CPU; JAX pinned to the CPU unless ``runtime_env`` says otherwise), on GPUs, or on
    ``replicas`` TPU slices through :class:`~marin_resources.accelerators.TpuConfig` (libtpu's
    lockfile removed afterwards). ``disk``, ``preemptible`` and ``regions`` are scheduling hints of
    Marin's cluster that a Ray request cannot express; they are kept, not applied.

    Attributes:
        cpu: CPUs of the task.
        ram: memory of the task (``"128m"``, ``"16g"``).
        disk: scratch disk (hint).
        device: the device (default: CPU only).
        replicas: TPU slices (``with_tpu(..., slice_count)``); other devices: 1.
        preemptible: may run on preemptible capacity (hint).
        regions: allowed regions (hint).
        runtime_env: ours and ``marin.resources``'s: the Ray ``runtime_env`` (``with_env_vars``).
    """

    cpu: int = 1
    ram: str = "128m"
    disk: str = "1g"
    device: DeviceConfig = dataclasses.field(default_factory=CpuConfig)
    replicas: int = 1
    preemptible: bool = True
    regions: Sequence[str] | None = None
    runtime_env: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        parse_size(self.ram)  # a typo fails here, not as a task that never schedules
        if self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")
        if self.replicas > 1 and not isinstance(self.device, TpuConfig):
            raise ValueError(f"replicas={self.replicas} needs a TPU device (slices); got {type(self.device).__name__}")

    @staticmethod
    def with_cpu(cpu: int = 1, ram: str = "128m", **kwargs: Any) -> ResourceConfig:
        """CPU-only work (fray: ``ResourceConfig(device=CpuConfig())``)."""
        return ResourceConfig(cpu=cpu, ram=ram, device=CpuConfig(), **kwargs)

    @staticmethod
    def with_gpu(gpu_type: str = "auto", count: int = 1, **kwargs: Any) -> ResourceConfig:
        """``count`` GPUs of ``gpu_type`` (``"auto"``: any GPU)."""
        kind = None if gpu_type in ("auto", "", None) else gpu_type.upper()
        return ResourceConfig(device=GpuConfig(gpu_count=count, accelerator_type=kind), **kwargs)

    @staticmethod
    def with_tpu(tpu_type: str, slice_count: int = 1, **kwargs: Any) -> ResourceConfig:
        """``slice_count`` slices of ``tpu_type`` (e.g. ``"v4-8"``; validated here)."""
        return ResourceConfig(
            device=TpuConfig(tpu_type=tpu_type, slice_count=slice_count), replicas=slice_count, **kwargs
        )

    def chip_count(self) -> int:
        """Accelerator chips over all replicas (0 for CPU only), as fray counts them."""
        if isinstance(self.device, TpuConfig):
            return self.device.topology.chips * self.replicas
        if isinstance(self.device, GpuConfig):
            return int(self.device.gpu_count) * self.replicas
        return 0

    def accelerator_descriptor(self) -> str | None:
        """The TPU or GPU type, or None (CPU only, any GPU)."""
        if isinstance(self.device, TpuConfig):
            return self.device.tpu_type
        if isinstance(self.device, GpuConfig):
            return self.device.accelerator_type
        return None

    def total_device_count(self) -> int:
        """Devices a training run sees: the chips, or 1 (the host) for CPU only."""
        return self.chip_count() or 1

    def with_env_vars(self, env: Mapping[str, str] | None = None, /, **kwargs: str) -> ResourceConfig:
        """A copy with extra environment variables in ``runtime_env``."""
        env_vars = {**(self.runtime_env.get("env_vars") or {}), **(env or {}), **kwargs}
        return dataclasses.replace(self, runtime_env={**self.runtime_env, "env_vars": env_vars})

    def _accelerator(self) -> DeviceConfig:
        if isinstance(self.device, TpuConfig):
            return dataclasses.replace(self.device, slice_count=self.replicas, num_cpus=self.cpu)
        if isinstance(self.device, GpuConfig):
            return dataclasses.replace(self.device, num_cpus=self.cpu)
        return CpuConfig(num_cpus=self.cpu, memory_bytes=parse_size(self.ram))

    def as_remote_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``ray.remote(...)`` (with ``runtime_env``)."""
        return {**self._accelerator().ray_remote_options(), "runtime_env": dict(self._env())}

    def _env(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        env = merged_runtime_env(self.runtime_env, extra)
        if isinstance(self.device, CpuConfig):  # as CpuOnlyConfig: JAX on the CPU unless told otherwise
            env["env_vars"] = {"JAX_PLATFORMS": "cpu", **(env.get("env_vars") or {})}
        return env

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` with this request; block and return its result."""
        accelerator = self._accelerator()
        if isinstance(accelerator, TpuConfig):
            fn = removing_tpu_lockfile(fn)
        return accelerator.launch(fn, config, self._env(runtime_env))


class _Common:
    """Methods Marin's ``ResourceConfig`` protocol gives every config."""

    runtime_env: Mapping[str, Any]

    def with_env_vars(self, env: Mapping[str, str] | None = None, /, **kwargs: str) -> Any:
        """A copy with extra environment variables in ``runtime_env``."""
        env_vars = {**(self.runtime_env.get("env_vars") or {}), **(env or {}), **kwargs}
        return dataclasses.replace(self, runtime_env={**self.runtime_env, "env_vars": env_vars})  # type: ignore[type-var]

    def as_decorator(self) -> Callable[[Callable[..., Any]], Any]:
        """``ray.remote(**self.as_remote_kwargs())``."""
        import ray

        return ray.remote(**self.as_remote_kwargs())  # type: ignore[attr-defined]


@dataclass(frozen=True)
class CpuOnlyConfig(_Common):
    """CPU-only work (local training without accelerators); JAX is pinned to the CPU."""

    num_cpus: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    runtime_env: Mapping[str, Any] = dataclasses.field(default_factory=lambda: {"env_vars": {"JAX_PLATFORMS": "cpu"}})
    device_flops_override: float | None = None

    def accelerator_descriptor(self) -> str | None:
        """None: no accelerator."""
        return None

    def as_remote_kwargs(self) -> dict[str, Any]:
        """``{"num_cpus", "runtime_env"}``."""
        return {"num_cpus": self.num_cpus, "runtime_env": dict(self.runtime_env)}

    def total_device_count(self) -> int:
        """One (the host)."""
        return 1

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` as a Ray task with ``num_cpus`` CPUs."""
        return CpuConfig(num_cpus=self.num_cpus).launch(fn, config, merged_runtime_env(self.runtime_env, runtime_env))


@dataclass(frozen=True)
class TpuPodConfig(_Common):
    """TPU work on ``slice_count`` slices of ``tpu_type`` (e.g. ``v4-128``)."""

    tpu_type: str
    slice_count: int = 1
    runtime_env: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    device_flops_override: float | None = None
    num_cpus: int = 8
    include_tpu_in_ray_resources: bool = False
    chip_count: int = 1
    include_tpu_head: bool = False
    packing_strategy: Literal["PACK", "STRICT_PACK"] = "PACK"

    def __post_init__(self) -> None:
        tpu_topology(self.tpu_type)  # a typo fails here, not as a task that never schedules
        if self.slice_count < 1:
            raise ValueError(f"slice_count must be >= 1, got {self.slice_count}")

    def accelerator_descriptor(self) -> str | None:
        """The TPU type."""
        return self.tpu_type

    def as_remote_kwargs(self) -> dict[str, Any]:
        """``{"runtime_env", "resources", "num_cpus"}``; the TPU itself is claimed by the launcher
        (Levanter's slice actors) unless ``include_tpu_in_ray_resources``."""
        resources: dict[str, Any] = {}
        if self.include_tpu_in_ray_resources:
            resources["TPU"] = self.chip_count
            if self.include_tpu_head:
                resources[f"TPU-{self.tpu_type}-head"] = 1
        return {"runtime_env": dict(self.runtime_env), "resources": resources, "num_cpus": self.num_cpus}

    def total_device_count(self) -> int:
        """Chips over all slices."""
        return self.slice_count * tpu_topology(self.tpu_type).chips

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` on every host of the slice(s), removing libtpu's lockfile afterwards."""
        accelerator = TpuConfig(tpu_type=self.tpu_type, slice_count=self.slice_count)
        return accelerator.launch(removing_tpu_lockfile(fn), config, merged_runtime_env(self.runtime_env, runtime_env))
