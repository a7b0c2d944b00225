"""Accelerator requests: CPU, GPU and TPU configs that map to Ray resource requests and run steps.

No Dagster import here: the step engine uses these directly.

Each config is a frozen dataclass with two methods:

* ``ray_remote_options()`` -- the keyword arguments for ``ray.remote(...)`` / ``.options(...)``;
* ``launch(fn, config, runtime_env=None)`` -- run ``fn(config)`` on Ray with those requests, block,
  and return its result.

Before submitting, ``launch`` checks that the cluster can ever satisfy the request. Ray would
otherwise keep an infeasible task pending forever (only a warning in the logs), which turns a typo
such as ``tpu:v4-16`` on a v4-8 cluster into a hang. When an autoscaler can add nodes, its reported
node types are checked instead of the live nodes.

TPUs follow Marin/Levanter: a TPU slice is claimed through the ``TPU-<type>-head`` resource of its
first host (``{"TPU": chips_per_host, "TPU-v4-8-head": 1}``) and multi-host / multi-slice /
preemptible runs go through ``levanter.infra.ray_tpu.run_on_pod_resumable``, which retries on
preemption. That path needs real TPU hosts (it asks Ray for the pod name of the node);
``TpuConfig(single_host=True)`` schedules one plain task with the head request instead, which is
what a single-host slice needs and what a fake local TPU (a Ray started with custom resources
``{"TPU": 4, "TPU-v4-8-head": 1}``) can run.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

logger = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT")

# Chips per host (VM) for each TPU generation, and the largest slice we know of. A "chip" is what
# Ray's ``TPU`` resource counts. v4 and v5p names count TensorCores (2 per chip: v4-8 = 4 chips);
# v5e (``v5litepod``) and v6e names count chips. Same numbers as levanter.infra.ray_tpu.TPU_CONFIGS.
_TPU_GENERATIONS: dict[str, dict[str, int]] = {
    # generation: cores_per_chip in the name, chips per host for multi-host slices, chips per host
    # for single-host slices up to ``single_host_max`` chips.
    "v4": {"cores_per_chip": 2, "chips_per_host": 4, "single_host_max": 4},
    "v5p": {"cores_per_chip": 2, "chips_per_host": 4, "single_host_max": 4},
    "v5litepod": {"cores_per_chip": 1, "chips_per_host": 4, "single_host_max": 8},
    "v6e": {"cores_per_chip": 1, "chips_per_host": 4, "single_host_max": 8},
}
# Sizes Google sells, from the public docs (and Levanter's table).
_TPU_SIZES: dict[str, tuple[int, ...]] = {
    "v4": (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
    "v5p": (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288),
    "v5litepod": (1, 2, 4, 8, 16, 32, 64, 128, 256),
    "v6e": (1, 4, 8, 16, 32, 64, 128, 256),
}
_TPU_ALIASES = {"v5e": "v5litepod"}


@dataclass(frozen=True)
class TpuTopology:
    """Shape of one TPU slice: total chips, hosts, and chips per host (what ``TPU`` counts)."""

    tpu_type: str
    chips: int
    hosts: int
    chips_per_host: int


def normalize_tpu_type(tpu_type: str) -> str:
    """Canonical TPU type name (``v5e-8`` -> ``v5litepod-8``); raises ValueError if unknown."""
    match = re.fullmatch(r"(v\d+[a-z]*)-(\d+)", tpu_type.strip().lower())
    if not match:
        raise ValueError(f"not a TPU type: {tpu_type!r} (expected e.g. 'v4-8', 'v5e-16', 'v6e-8')")
    generation = _TPU_ALIASES.get(match.group(1), match.group(1))
    size = int(match.group(2))
    if generation not in _TPU_SIZES:
        raise ValueError(f"unknown TPU generation {match.group(1)!r} in {tpu_type!r}; known: v4, v5e, v5p, v6e")
    if size not in _TPU_SIZES[generation]:
        raise ValueError(f"no TPU slice {tpu_type!r}; {generation} sizes are {list(_TPU_SIZES[generation])}")
    return f"{generation}-{size}"


def tpu_topology(tpu_type: str) -> TpuTopology:
    """Chips, hosts and chips per host of a TPU slice type such as ``v4-8`` or ``v6e-16``."""
    name = normalize_tpu_type(tpu_type)
    generation, size = name.rsplit("-", 1)
    spec = _TPU_GENERATIONS[generation]
    chips = int(size) // spec["cores_per_chip"]
    per_host = chips if chips <= spec["single_host_max"] else spec["chips_per_host"]
    return TpuTopology(tpu_type=name, chips=chips, hosts=max(1, chips // per_host), chips_per_host=per_host)


class InfeasibleResourceError(RuntimeError):
    """The Ray cluster has no node (and no autoscaler node type) that could ever run a request."""


def _requested_resources(options: Mapping[str, Any]) -> dict[str, float]:
    """The resource quantities Ray will need on a single node for ``options``."""
    wanted: dict[str, float] = {}
    if options.get("num_cpus"):
        wanted["CPU"] = float(options["num_cpus"])
    if options.get("num_gpus"):
        wanted["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        wanted["memory"] = float(options["memory"])
    if options.get("accelerator_type"):
        # Ray turns accelerator_type="A100" into a tiny request of this label resource.
        wanted[f"accelerator_type:{options['accelerator_type']}"] = 0.001
    for name, amount in (options.get("resources") or {}).items():
        wanted[name] = float(amount)
    return wanted


def _autoscaler_node_types() -> list[dict[str, float]] | None:
    """Resources of the node types an autoscaler may add, or None when there is no autoscaler.

    Ray's v2 autoscaler (KubeRay with ``autoscalerOptions.version: v2``) publishes its node groups
    in the GCS. The v1 autoscaler publishes nothing usable, so ``MARIN_RAY_AUTOSCALER=1`` declares
    one; the check is then skipped (we cannot know what it can add).
    """
    if os.environ.get("MARIN_RAY_AUTOSCALER", "").lower() in {"1", "true", "yes"}:
        return []
    from marin_resources.ray_internals import autoscaler_node_types

    return autoscaler_node_types()


def _fits(node: Mapping[str, float], wanted: Mapping[str, float]) -> bool:
    return all(node.get(k, 0.0) >= v for k, v in wanted.items())


def infeasible_reason(wanted: Mapping[str, float], nodes: list[dict[str, float]]) -> str:
    """Why no node in ``nodes`` can run a request for ``wanted``, naming only what is short:
    resources no node has; resources no node has enough of (with the most one node has); or, when
    each resource alone is there, that no single node has them all together."""
    missing = sorted(k for k in wanted if not any(k in n for n in nodes))
    short = sorted(
        f"{k} (wants {wanted[k]:g}, the most on one node is {max(n.get(k, 0.0) for n in nodes):g})"
        for k in wanted
        if k not in missing and not any(n.get(k, 0.0) >= wanted[k] for n in nodes)
    )
    detail = []
    if missing:
        detail.append(f"no node has {', '.join(repr(m) for m in missing)}")
    if short:
        detail.append("not enough on any one node: " + "; ".join(short))
    if not detail:
        detail.append(
            "each resource is on some node, but no single node has all of "
            + ", ".join(f"{k} {v:g}" for k, v in sorted(wanted.items()))
            + " (a Ray task runs on one node)"
        )
    return "; ".join(detail)


def check_feasible(options: Mapping[str, Any], what: str = "task") -> None:
    """Raise :class:`InfeasibleResourceError` if no node could ever satisfy ``options``.

    A request is feasible when one alive node (or one autoscaler node type) has every requested
    resource in at least the requested quantity -- a Ray task never spans nodes.
    """
    import ray

    wanted = _requested_resources(options)
    if not wanted:
        return
    nodes = [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]
    if any(_fits(node, wanted) for node in nodes):
        return
    node_types = _autoscaler_node_types()
    if node_types == []:  # an autoscaler we cannot inspect: let Ray wait for it
        return
    if node_types and any(_fits(t, wanted) for t in node_types):
        return
    totals = dict(ray.cluster_resources())
    scaler = "no autoscaler node type provides it" if node_types is not None else "no autoscaler"
    raise InfeasibleResourceError(
        f"Ray cluster can never run this {what}: {infeasible_reason(wanted, nodes + list(node_types or []))} "
        f"(request {dict(sorted(wanted.items()))}; {scaler}; cluster has {sorted(totals)}). "
        "Start Ray with that resource, or change the step's resources."
    )


def _real_tpu_heads(head_resource: str) -> bool:
    """True when a node with ``head_resource`` is a TPU host Ray detected itself (it then also has
    an ``accelerator_type:TPU-...`` label), or when no live node has it (an autoscaler will add
    real hosts). False for fake TPUs: custom resources on an ordinary node."""
    import ray

    heads = [n["Resources"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get(head_resource)]
    if not heads:
        return True
    return any(any(k.startswith("accelerator_type:TPU") for k in res) for res in heads)


def _run_remote(
    fn: Callable[[ConfigT], Any],
    config: ConfigT,
    options: dict[str, Any],
    runtime_env: dict | None,
    what: str,
) -> Any:
    """Submit ``fn(config)`` as one Ray task with ``options`` after the feasibility check."""
    import ray

    if not ray.is_initialized():
        from marin_resources.ray_connect import ensure_ray

        ensure_ray()
    check_feasible(options, what)
    opts = dict(options)
    from marin_resources.ray_jobs import task_name_of
    from marin_resources.runtime_env import split_secret_env_vars, with_secret_environment

    if not isinstance(fn, ray.remote_function.RemoteFunction):
        # Secret env vars travel with the function, not in the runtime_env that Ray logs. (A remote
        # function given here cannot be wrapped; the step launcher never passes one.)
        runtime_env, secrets = split_secret_env_vars(runtime_env)
        fn = with_secret_environment(fn, secrets)
    if runtime_env:
        opts["runtime_env"] = runtime_env
    if task_name_of(fn):  # the step's name, shown by the dashboard and `ray list tasks`
        opts.setdefault("name", task_name_of(fn))
    remote_fn = fn if isinstance(fn, ray.remote_function.RemoteFunction) else ray.remote(fn)
    return ray.get(remote_fn.options(**opts).remote(config))


def merged_runtime_env(own: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``extra`` (the step's pip / pass-through env) with a config's own ``runtime_env`` on top."""
    merged = dict(extra or {})
    for key, value in own.items():
        if key == "env_vars":
            merged["env_vars"] = {**(merged.get("env_vars") or {}), **dict(value)}
        elif key == "pip":
            merged["pip"] = list(dict.fromkeys([*(merged.get("pip") or []), *value]))
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class CpuConfig:
    """CPU-only work.

    Attributes:
        num_cpus: logical CPUs for the task.
        memory_bytes: Ray ``memory`` request (None: no memory reservation).
    """

    num_cpus: float = 1
    memory_bytes: int | None = None

    def ray_remote_options(self) -> dict[str, Any]:
        """``{"num_cpus": n}`` plus ``memory`` when set."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.memory_bytes is not None:
            options["memory"] = self.memory_bytes
        return options

    def launch(self, fn: Callable[[ConfigT], Any], config: ConfigT, runtime_env: dict | None = None) -> Any:
        """Run ``fn(config)`` as a Ray task with this request; block and return its result."""
        return _run_remote(fn, config, self.ray_remote_options(), runtime_env, f"CPU task ({self.num_cpus} CPUs)")


@dataclass(frozen=True)
class GpuConfig:
    """GPU work on one node: ``gpu_count`` GPUs of ``accelerator_type`` (the only ``GpuConfig``).

    Marin's ``marin.resources.GpuConfig`` (same fields, defaults and methods; ``marin_resources``
    exports this class), the GPU device of :class:`~marin_resources.resource_config.ResourceConfig`
    and what a ``gpu:A100x8`` spec parses to.

    Attributes:
        gpu_count: GPUs for the task (fractions share a GPU).
        runtime_env: the Ray ``runtime_env`` of the task (``with_env_vars`` adds to it).
        accelerator_type: Ray accelerator type such as ``"A100"``, ``"H100"``, ``"L4"`` (upper-cased;
            None: any GPU).
        device_flops_override: Marin's figure for MFU logging (kept, not applied).
        packing_strategy: Marin's placement-group strategy (kept, not applied: one task, one node).
        num_cpus: CPUs that come with the task.
    """

    gpu_count: float = 1
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    accelerator_type: str | None = None
    device_flops_override: float | None = None
    packing_strategy: Literal["PACK", "STRICT_PACK"] = "PACK"
    num_cpus: float = 1

    def __post_init__(self) -> None:
        if self.accelerator_type is not None:  # Ray's accelerator types are upper case
            object.__setattr__(self, "accelerator_type", self.accelerator_type.upper())
        if self.gpu_count <= 0:
            raise ValueError(f"gpu_count must be positive, got {self.gpu_count}")

    def ray_remote_options(self) -> dict[str, Any]:
        """``{"num_cpus", "num_gpus"}`` plus ``accelerator_type`` when a type is given."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus, "num_gpus": self.gpu_count}
        if self.accelerator_type:
            options["accelerator_type"] = self.accelerator_type
        return options

    def as_remote_kwargs(self) -> dict[str, Any]:
        """Marin's ``{"num_gpus", "runtime_env"}`` plus ``accelerator_type`` when set."""
        out: dict[str, Any] = {"num_gpus": self.gpu_count, "runtime_env": dict(self.runtime_env)}
        if self.accelerator_type is not None:
            out["accelerator_type"] = self.accelerator_type
        return out

    def as_decorator(self) -> Callable[[Callable[..., Any]], Any]:
        """``ray.remote(**self.as_remote_kwargs())``."""
        import ray

        return ray.remote(**self.as_remote_kwargs())

    def accelerator_descriptor(self) -> str | None:
        """The GPU type, or None for any GPU."""
        return self.accelerator_type

    def total_device_count(self) -> int:
        """The GPUs a training run sees (at least one)."""
        return max(1, int(self.gpu_count))

    def with_env_vars(self, env: Mapping[str, str] | None = None, /, **kwargs: str) -> GpuConfig:
        """A copy with extra environment variables in ``runtime_env``."""
        env_vars = {**(self.runtime_env.get("env_vars") or {}), **(env or {}), **kwargs}
        return replace(self, runtime_env={**self.runtime_env, "env_vars": env_vars})

    def launch(
        self, fn: Callable[[ConfigT], Any], config: ConfigT, runtime_env: Mapping[str, Any] | None = None
    ) -> Any:
        """Run ``fn(config)`` as a Ray task on a node with the GPUs; block and return its result."""
        label = f"{self.gpu_count:g}x{self.accelerator_type or 'GPU'}"
        env = merged_runtime_env(self.runtime_env, runtime_env)
        return _run_remote(fn, config, self.ray_remote_options(), env or None, f"GPU task ({label})")


@dataclass(frozen=True)
class TpuConfig:
    """TPU work on one or more slices.

    Attributes:
        tpu_type: slice type, e.g. ``v4-8``, ``v5e-16`` / ``v5litepod-16``, ``v5p-32``, ``v6e-8``.
        slice_count: number of slices (multislice when > 1).
        single_host: True: run one plain Ray task with the head request instead of Levanter's slice
            actors (no preemption retries; single-host slices only). False: always Levanter.
            None (default): Levanter when the cluster's TPU hosts are real (Ray detected them, or an
            autoscaler will add them); the plain task when the TPU resources are custom labels only
            (a fake local TPU), which Levanter cannot drive (it asks each host for its pod name).
        max_retries_preemption: Levanter retries after preemption.
        max_retries_failure: Levanter retries after the function failed.
        num_cpus: CPUs requested with the head task on the ``single_host`` path.
    """

    tpu_type: str = "v4-8"
    slice_count: int = 1
    single_host: bool | None = None
    max_retries_preemption: int = 1_000_000
    max_retries_failure: int = 10
    num_cpus: float = 1

    def __post_init__(self) -> None:
        # Validate early (config-file typos) and store the canonical name.
        object.__setattr__(self, "tpu_type", normalize_tpu_type(self.tpu_type))
        if self.slice_count < 1:
            raise ValueError(f"slice_count must be >= 1, got {self.slice_count}")
        if self.single_host is True and (self.slice_count != 1 or self.topology.hosts != 1):
            raise ValueError(
                f"single_host=True needs one single-host slice; {self.slice_count} x {self.tpu_type} "
                f"has {self.slice_count * self.topology.hosts} hosts"
            )

    @property
    def topology(self) -> TpuTopology:
        """Chips/hosts of one slice."""
        return tpu_topology(self.tpu_type)

    @property
    def head_resource(self) -> str:
        """The custom resource Ray gives the first host of a slice, e.g. ``TPU-v4-8-head``."""
        return f"TPU-{self.tpu_type}-head"

    def ray_remote_options(self) -> dict[str, Any]:
        """The request for the head host of a slice: ``{"TPU": chips_per_host, "TPU-<type>-head": 1}``."""
        return {
            "num_cpus": self.num_cpus,
            "resources": {"TPU": self.topology.chips_per_host, self.head_resource: 1},
        }

    def launch(self, fn: Callable[[ConfigT], Any], config: ConfigT, runtime_env: dict | None = None) -> Any:
        """Run ``fn(config)`` on the TPU slice(s); block and return the result of the first host.

        ``single_host``: one Ray task with :meth:`ray_remote_options`. Otherwise Levanter's
        ``run_on_pod_resumable`` (one slice) or ``run_on_pod_multislice_resumable`` runs ``fn`` on
        every host of every slice, retrying on preemption; every host returns a result and the first
        one is returned (hosts of an SPMD program compute the same thing).
        """
        import ray

        what = f"TPU job ({self.slice_count} x {self.tpu_type})"
        if self.single_host:
            return _run_remote(fn, config, self.ray_remote_options(), runtime_env, what)
        if not ray.is_initialized():
            from marin_resources.ray_connect import ensure_ray

            ensure_ray()
        # Levanter's slice actor claims the head resource; check that one exists before it waits.
        check_feasible({"resources": {self.head_resource: 1}}, what)
        if self.single_host is None and not _real_tpu_heads(self.head_resource):
            if self.slice_count != 1 or self.topology.hosts != 1:
                raise InfeasibleResourceError(
                    f"{what}: the nodes with {self.head_resource!r} are not TPU hosts detected by Ray "
                    "(custom resource labels only), and a multi-host/multislice job needs Levanter's "
                    "slice actors on real TPU hosts"
                )
            logger.info("%s: TPU resources are custom labels (no real TPU host); running one plain task", what)
            return _run_remote(fn, config, self.ray_remote_options(), runtime_env, what)
        from levanter.infra import ray_tpu

        from marin_resources.runtime_env import split_secret_env_vars, with_secret_environment

        # Levanter wants a zero-argument remote function with max_calls=1 (libtpu must be
        # released between runs) and passes runtime_env to the host actors itself, so the
        # function's own runtime_env carries ours -- without its secrets, which Ray would log:
        # they travel with the function.
        runtime_env, secrets = split_secret_env_vars(runtime_env)
        with_secrets = with_secret_environment(fn, secrets)

        def call() -> Any:
            return with_secrets(config)

        remote_options: dict[str, Any] = {"max_calls": 1}
        if runtime_env:
            remote_options["runtime_env"] = runtime_env
        remote_fn = ray.remote(**remote_options)(call)
        if self.slice_count == 1:
            results = ray_tpu.run_on_pod_resumable(
                remote_fn,
                self.tpu_type,
                max_retries_preemption=self.max_retries_preemption,
                max_retries_failure=self.max_retries_failure,
            )
        else:
            results = ray_tpu.run_on_pod_multislice_resumable(
                remote_fn,
                self.tpu_type,
                self.slice_count,
                max_retries_preemption=self.max_retries_preemption,
                max_retries_failure=self.max_retries_failure,
            )
        return results[0] if isinstance(results, list) and results else results


Accelerator = CpuConfig | GpuConfig | TpuConfig


@runtime_checkable
class StepResources(Protocol):
    """The one protocol of a step's ``resources``: a request that runs ``fn(config)`` on Ray.

    Implemented by the accelerator configs here (``CpuConfig``, ``GpuConfig``, ``TpuConfig``) and by
    Marin's resource configs (:mod:`marin_resources.resource_config`), which translate Marin's names
    into these. Anything else a step may carry (a spec string, a dict, None) is resolved into one by
    :func:`step_resources`.
    """

    def launch(self, fn: Callable[[Any], Any], config: Any, runtime_env: Mapping[str, Any] | None = None) -> Any:
        """Run ``fn(config)`` with this request on Ray; block and return its result."""
        ...


def step_resources(value: StepResources | str | Mapping[str, Any] | None) -> StepResources:
    """A step's ``resources`` as a :class:`StepResources`: an object that implements the protocol as
    it is; a spec string (``"tpu:v4-8"``), a dict or None (one CPU) through :func:`accelerator_from_dict`."""
    if isinstance(value, StepResources):
        return value
    return accelerator_from_dict(value)


def parse_accelerator(spec: str) -> Accelerator:
    """Parse a short accelerator spec from a config file.

    ``"cpu"``, ``"cpu:4"`` (CPUs), ``"gpu"``, ``"gpu:2"``, ``"gpu:A100"``, ``"gpu:A100x8"``,
    ``"tpu:v4-8"``, ``"tpu:v5e-16x2"`` (two slices).
    """
    text = spec.strip()
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    if kind == "cpu":
        if not rest:
            return CpuConfig()
        cpus = float(rest)
        return CpuConfig(num_cpus=int(cpus) if cpus.is_integer() else cpus)
    if kind == "gpu":
        if not rest:
            return GpuConfig()
        count_text, gpu_type = "1", None
        if re.fullmatch(r"\d+(?:\.\d+)?", rest):
            count_text = rest
        elif match := re.fullmatch(r"([A-Za-z][\w-]*?)x(\d+(?:\.\d+)?)", rest):
            gpu_type, count_text = match.group(1), match.group(2)
        elif re.fullmatch(r"[A-Za-z][\w-]*", rest) and not rest.endswith("x"):
            # A type ending in a lowercase "x" is a count left out ("A100x"), not a GPU model.
            gpu_type = rest
        else:
            raise ValueError(f"bad GPU spec {spec!r}: expected gpu, gpu:N, gpu:TYPE or gpu:TYPExN")
        count = float(count_text)
        return GpuConfig(gpu_count=int(count) if count.is_integer() else count, accelerator_type=gpu_type)
    if kind == "tpu":
        match = re.fullmatch(r"(v\d+[a-z]*-\d+)(?:x(\d+))?", rest.strip().lower())
        if not match:
            raise ValueError(f"bad TPU spec {spec!r}: expected tpu:TYPE or tpu:TYPExSLICES, e.g. tpu:v4-8")
        return TpuConfig(tpu_type=match.group(1), slice_count=int(match.group(2) or 1))
    raise ValueError(f"unknown accelerator {spec!r}: expected cpu, gpu[:TYPE][xN] or tpu:TYPE")


_KINDS: dict[str, type] = {"cpu": CpuConfig, "gpu": GpuConfig, "tpu": TpuConfig}
_GPU_FIELD_ALIASES = {"count": "gpu_count", "type": "accelerator_type"}


def accelerator_from_dict(value: str | Mapping[str, Any] | Accelerator | None) -> Accelerator:
    """Accelerator from a config value: a spec string, ``{"kind": "tpu", "tpu_type": "v4-8"}``,
    ``{"tpu": {"tpu_type": "v4-8"}}``, an existing config, or None (one CPU)."""
    if value is None:
        return CpuConfig()
    if isinstance(value, CpuConfig | GpuConfig | TpuConfig):
        return value
    if isinstance(value, str):
        return parse_accelerator(value)
    if isinstance(value, Mapping):
        data = dict(value)
        if "kind" in data or "type_" in data:
            kind = str(data.pop("kind", None) or data.pop("type_")).lower()
            fields = data
        elif len(data) == 1 and next(iter(data)).lower() in _KINDS:
            kind, fields = next(iter(data.items()))
            kind = kind.lower()
            fields = dict(fields or {})
        else:
            raise ValueError(f"accelerator dict needs 'kind' (cpu/gpu/tpu): {value!r}")
        if kind not in _KINDS:
            raise ValueError(f"unknown accelerator kind {kind!r}; expected one of {sorted(_KINDS)}")
        if kind == "gpu":  # the short names config files used before GpuConfig took Marin's field names
            fields = {_GPU_FIELD_ALIASES.get(k, k): v for k, v in fields.items()}
        try:
            return _KINDS[kind](**fields)
        except TypeError as exc:
            raise ValueError(f"bad fields for {kind} accelerator {fields!r}: {exc}") from exc
    raise TypeError(f"cannot make an accelerator from {type(value).__name__}: {value!r}")


def accelerator_to_dict(accelerator: Accelerator) -> dict[str, Any]:
    """Inverse of :func:`accelerator_from_dict` (for metadata and config files)."""
    from dataclasses import asdict

    kind = {CpuConfig: "cpu", GpuConfig: "gpu", TpuConfig: "tpu"}[type(accelerator)]
    return {"kind": kind, **asdict(accelerator)}
