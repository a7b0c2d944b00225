"""Launch one step's function: in this process, or as a Ray task (no Dagster import).

The runner (:mod:`marin_assets.execution.runner`) decides *when* a unit runs and records its status;
this module decides *where* its function runs and how: in process for a plain function, on Ray for a
``@ray.remote`` function, a step that declares ``resources``, a step whose pip groups this interpreter
lacks, or every step when ``ray_connect.steps_on_ray()``. A Ray task is fenced by the step's lease
(cancelled when the lease is lost) and records where it ran (``marin/ran_on``), its shard tasks'
nodes included.

Progress: the step's progress lines (:func:`marin_resources.progress.report_progress`) are tagged
with its name wherever it runs. On Ray the task gets the driver's relay (a Ray actor; public API),
so its lines reach this process's listeners (the Dagster run's logs, the command line's run log)
from any node, directly connected or through Ray Client. The step's last line and the number of
lines are added to its metadata (``marin/progress``, ``marin/progress_lines``): the materialization
shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marin_assets.execution.fence import active_fence, on_lease_lost
from marin_assets.execution.lease import StepLease, guard_remote
from marin_assets.execution.versioning import ResolvedStep
from marin_resources.runtime_env import split_secret_env_vars, with_secret_environment


def is_ray_remote_function(fn: Any) -> bool:
    """True for a function decorated with ``@ray.remote`` (checked without importing Ray)."""
    return type(fn).__name__ == "RemoteFunction" and type(fn).__module__.startswith("ray.")


def runs_in_process(step: Any, runtime_env: dict[str, Any]) -> bool:
    """Whether ``step`` runs in this process: a plain function, no resources, not ``steps_on_ray()``,
    and nothing to pip-install -- a step whose ``pip_dependency_groups`` this interpreter does not
    satisfy runs as a Ray task with them installed, as Marin runs every step (``RuntimeEnv(pip=...)``)."""
    from marin_resources.ray_connect import steps_on_ray

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


PROGRESS_KEY = "marin/progress"
PROGRESS_LINES_KEY = "marin/progress_lines"


def _with_progress_summary(result: Any, step: str) -> Any:
    """``result`` (a step's metadata dict, or None) with the step's last progress line and line count
    (when it reported any); other results unchanged."""
    from marin_resources.progress import last_progress

    last = last_progress(step)
    if last is None or (result is not None and not isinstance(result, dict)):
        return result
    line, count = last
    return {**(result or {}), PROGRESS_KEY: line, PROGRESS_LINES_KEY: count}


def launch_step_function(node: ResolvedStep, config: Any) -> Any:
    """Call the step function (see :func:`_launch`) with its progress lines tagged with its name, and
    their summary added to its metadata."""
    from marin_resources.progress import last_progress, reporting_for

    last_progress(node.name)  # a stale summary of an earlier attempt in this process
    with reporting_for(node.name):
        result = _launch(node, config)
    return _with_progress_summary(result, node.name)


def _in_process(fn: Callable[[Any], Any], config: Any) -> Any:
    """Call ``fn`` here; when its shards ran as Ray tasks (an explicit Ray shard pool), its metadata
    says where (``marin/ran_on``: ``shard_nodes`` alone, the step itself ran on no Ray node)."""
    from marin_resources.ray_jobs import PLACEMENT_KEY, collecting_shard_nodes, with_shard_nodes

    with collecting_shard_nodes() as shard_nodes:
        result = fn(config)
    if not shard_nodes or (result is not None and not isinstance(result, dict)):
        return result
    return {**(result or {}), PLACEMENT_KEY: with_shard_nodes({}, shard_nodes)}


def _launch(node: ResolvedStep, config: Any) -> Any:
    """Call the step function: on Ray when it is a remote function, declares resources or needs pip
    groups this interpreter lacks, or when ``ray_connect.steps_on_ray()`` (a Ray Client address or
    ``$MARIN_STEPS_ON_RAY=1``: the production topology, heavy work on the Ray worker nodes)."""
    step = node.step
    from marin_resources.runtime_env import runtime_env_for

    runtime_env = runtime_env_for(step.pip_dependency_groups)
    if runs_in_process(step, runtime_env):
        return _in_process(step.fn, config)
    import ray

    from marin_resources.progress import driver_relay, run_reporting
    from marin_resources.ray_connect import ensure_ray
    from marin_resources.ray_jobs import name_task, recording_placement

    ensure_ray()
    relay = driver_relay()
    # Every Ray path records where the step ran (node id, assigned resources) in its metadata, and
    # sends its progress lines to this driver's relay.
    if step.resources is not None or not is_ray_remote_function(step.fn):
        from marin_resources.accelerators import step_resources

        # An accelerator config or one of Marin's resource configs, a spec string ("tpu:v4-8"), a
        # dict or None (one CPU): one protocol, StepResources.
        resources = step_resources(step.resources)
        fn = getattr(step.fn, "_function", step.fn)
        # The Ray task is named after the step (not after the innermost wrapper, `fenced`).
        task = name_task(_fenced(run_reporting(recording_placement(fn), node.name, relay.forwarder())), node.name)
        try:
            return resources.launch(task, config, runtime_env=runtime_env or None)
        finally:
            relay.drain()
    # A @ray.remote step keeps its own options (num_cpus, resources, ...).
    options = dict(getattr(step.fn, "_default_options", None) or {})
    options.setdefault("name", node.name)
    own_env = options.pop("runtime_env", None)
    if runtime_env or own_env:
        from marin_resources.accelerators import merged_runtime_env

        options["runtime_env"] = merged_runtime_env(own_env or {}, runtime_env)
    options["runtime_env"], secrets = split_secret_env_vars(options.get("runtime_env"))
    if not options["runtime_env"]:
        del options["runtime_env"]
    wrapped = _fenced(
        run_reporting(
            with_secret_environment(recording_placement(step.fn._function), secrets), node.name, relay.forwarder()
        )
    )
    remote = ray.remote(**options)(wrapped) if options else ray.remote(wrapped)
    ref = remote.remote(config)
    # Fencing: a runner that loses its lease kills the task instead of letting it keep writing.
    unregister = on_lease_lost(lambda: ray.cancel(ref, force=True))
    try:
        return ray.get(ref)
    finally:
        unregister()
        relay.drain()
