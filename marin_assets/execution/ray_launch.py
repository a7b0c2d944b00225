"""Launch one step's function: in this process, or as a Ray task (no Dagster import).

The runner (:mod:`marin_assets.execution.runner`) decides *when* a unit runs and records its status;
this module decides *where* its function runs and how: in process for a plain function, on Ray for a
``@ray.remote`` function, a step that declares ``resources``, a step whose pip groups this interpreter
lacks, or every step when ``ray_cluster.steps_on_ray()``. A Ray task is fenced by the step's lease
(cancelled when the lease is lost) and records where it ran (``marin/ran_on``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marin_assets.execution.fence import active_fence, on_lease_lost
from marin_assets.execution.lease import StepLease, guard_remote
from marin_assets.execution.versioning import ResolvedStep


def is_ray_remote_function(fn: Any) -> bool:
    """True for a function decorated with ``@ray.remote`` (checked without importing Ray)."""
    return type(fn).__name__ == "RemoteFunction" and type(fn).__module__.startswith("ray.")


def runs_in_process(step: Any, runtime_env: dict[str, Any]) -> bool:
    """Whether ``step`` runs in this process: a plain function, no resources, not ``steps_on_ray()``,
    and nothing to pip-install -- a step whose ``pip_dependency_groups`` this interpreter does not
    satisfy runs as a Ray task with them installed, as Marin runs every step (``RuntimeEnv(pip=...)``)."""
    from marin_resources.ray_cluster import steps_on_ray

    return (
        step.resources is None
        and not is_ray_remote_function(step.fn)
        and not runtime_env.get("pip")
        and not steps_on_ray()
    )


def _fenced(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` guarded by the running step's lease inside its Ray worker (see ``lease.guard_remote``)."""
    lease = active_fence()
    return guard_remote(fn, lease) if isinstance(lease, StepLease) else fn


def launch_step_function(node: ResolvedStep, config: Any) -> Any:
    """Call the step function: on Ray when it is a remote function, declares resources or needs pip
    groups this interpreter lacks, or when ``ray_cluster.steps_on_ray()`` (a Ray Client address or
    ``$MARIN_STEPS_ON_RAY=1``: the production topology, heavy work on the Ray worker nodes)."""
    step = node.step
    from marin_resources.runtime_env import runtime_env_for

    runtime_env = runtime_env_for(step.pip_dependency_groups)
    if runs_in_process(step, runtime_env):
        return step.fn(config)
    import ray

    from marin_resources.ray_cluster import ensure_ray, name_task, recording_placement

    ensure_ray()
    # Every Ray path records where the step ran (node id, assigned resources) in its metadata.
    if step.resources is not None or not is_ray_remote_function(step.fn):
        from marin_resources.accelerators import accelerator_from_dict

        # resources may be an accelerator config or one of Marin's resource configs (both have
        # launch()), a spec string ("tpu:v4-8"), a dict or None (one CPU).
        resources = step.resources
        accelerator = resources if hasattr(resources, "launch") else accelerator_from_dict(resources)
        fn = getattr(step.fn, "_function", step.fn)
        # The Ray task is named after the step (not after the innermost wrapper, `fenced`).
        task = name_task(_fenced(recording_placement(fn)), node.name)
        return accelerator.launch(task, config, runtime_env=runtime_env or None)
    # A @ray.remote step keeps its own options (num_cpus, resources, ...).
    options = dict(getattr(step.fn, "_default_options", None) or {})
    options.setdefault("name", node.name)
    if runtime_env:
        options["runtime_env"] = runtime_env
    wrapped = _fenced(recording_placement(step.fn._function))
    remote = ray.remote(**options)(wrapped) if options else ray.remote(wrapped)
    ref = remote.remote(config)
    # Fencing: a runner that loses its lease kills the task instead of letting it keep writing.
    unregister = on_lease_lost(lambda: ray.cancel(ref, force=True))
    try:
        return ray.get(ref)
    finally:
        unregister()
