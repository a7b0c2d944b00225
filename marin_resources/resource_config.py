"""Marin's resource configs (``marin.resources``): ``CpuOnlyConfig``, ``GpuConfig``, ``TpuPodConfig``.

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from marin_resources.accelerators import CpuConfig, TpuConfig, tpu_topology
from marin_resources.accelerators import GpuConfig as AcceleratorGpuConfig

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


def _merged_env(own: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``extra`` (the step's pip / pass-through env) with this config's ``runtime_env`` on top."""
    merged = dict(extra or {})
    for key, value in own.items():
        if key == "env_vars":
            merged["env_vars"] = {**(merged.get("env_vars") or {}), **dict(value)}
        elif key == "pip":
            merged["pip"] = list(dict.fromkeys([*(merged.get("pip") or []), *value]))
        else:
            merged[key] = value
    return merged


@runtime_checkable
class ResourceConfig(Protocol):
    """What a step or a training run needs: a Ray request plus a Ray ``runtime_env``."""

    runtime_env: Mapping[str, Any]

    def accelerator_descriptor(self) -> str | None:
        """The accelerator type (``"v4-8"``, ``"A100"``), or None for CPU-only work."""
        ...

    def as_remote_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``ray.remote(...)`` / ``.options(...)``."""
        ...

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` with this request; block and return its result."""
        ...


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
        return CpuConfig(num_cpus=self.num_cpus).launch(fn, config, _merged_env(self.runtime_env, runtime_env))


@dataclass(frozen=True)
class GpuConfig(_Common):
    """GPU work: ``gpu_count`` GPUs of ``accelerator_type`` (a Ray accelerator type; None: any)."""

    gpu_count: int = 1
    runtime_env: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    accelerator_type: str | None = None
    device_flops_override: float | None = None
    packing_strategy: Literal["PACK", "STRICT_PACK"] = "PACK"

    def __post_init__(self) -> None:
        if self.accelerator_type is not None:  # Ray's accelerator types are upper case
            object.__setattr__(self, "accelerator_type", self.accelerator_type.upper())
        if self.gpu_count <= 0:
            raise ValueError(f"gpu_count must be positive, got {self.gpu_count}")

    def accelerator_descriptor(self) -> str | None:
        """The GPU type, or None for any GPU."""
        return self.accelerator_type

    def as_remote_kwargs(self) -> dict[str, Any]:
        """``{"num_gpus", "runtime_env"}`` plus ``accelerator_type`` when set."""
        out: dict[str, Any] = {"num_gpus": self.gpu_count, "runtime_env": dict(self.runtime_env)}
        if self.accelerator_type is not None:
            out["accelerator_type"] = self.accelerator_type
        return out

    def total_device_count(self) -> int:
        """``gpu_count``."""
        return self.gpu_count

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` as a Ray task on a node with the GPUs."""
        accelerator = AcceleratorGpuConfig(count=self.gpu_count, type=self.accelerator_type)
        return accelerator.launch(fn, config, _merged_env(self.runtime_env, runtime_env))


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
        return accelerator.launch(removing_tpu_lockfile(fn), config, _merged_env(self.runtime_env, runtime_env))
