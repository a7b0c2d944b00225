"""Launch one step's function: in this process, or as a Ray task (no Dagster import).

The runner (:mod:`marin_assets.execution.runner`) decides *when* a unit runs and records its status;
this module decides *where* its function runs and how: in process for a plain function, on Ray for a
``@ray.remote`` function, a step that declares ``resources``, a step whose pip groups this interpreter
lacks, or every step when ``ray_connect.steps_on_ray()``. A Ray task is fenced by the step's lease
(cancelled when the lease is lost) and records where it ran (``marin/ran_on``), its shard tasks'
nodes included.

Progress and output: the step's progress lines (:func:`marin_resources.progress.report_progress`)
and the lines it prints go to the reporter the attempt installed around the launch (which makes each
one a :class:`~marin_assets.execution.events.Progress` event of the run's stream). On Ray the task
sends them through the driver's relay (a Ray actor; public API), from any node, directly connected
or through Ray Client; the driver then prints the task's output once into its own stdout (``(<step>)
line``), as Ray's ``log_to_driver`` would -- which is off, since on a machine with several Ray nodes
it prints every line once per node (``marin_resources.ray_connect.driver_prints_step_output``). The
step's last progress line and the number of progress lines
are added to its metadata (``marin/progress``, ``marin/progress_lines``): the materialization shows them.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import Any

from marin_assets.execution.fence import active_fence, on_lease_lost
from marin_assets.execution.lease import StepLease, guard_remote
from marin_assets.execution.versioning import ResolvedStep
from marin_resources.progress import (
    PROGRESS_LOGGER,
    Reporter,
    capturing_output,
    current_reporter,
    driver_relay,
    reporting_to,
    run_reporting,
)
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


class _Summary:
    """The reporter a launch hands on: counts the progress lines (and keeps the last) for the step's
    metadata, then passes every line to the attempt's reporter."""

    def __init__(self, reporter: Reporter | None) -> None:
        self.reporter = reporter
        self.last: str | None = None
        self.count = 0

    def __call__(self, line: str, metrics: Mapping[str, float], stream: str) -> None:
        if stream == "progress":
            self.last, self.count = line, self.count + 1
        if self.reporter is not None:
            self.reporter(line, metrics, stream)
        elif stream == "progress":
            logging.getLogger(PROGRESS_LOGGER).info(line)

    def added_to(self, result: Any) -> Any:
        """``result`` (a step's metadata dict, or None) with the last progress line and the line count
        (when the step reported any); other results unchanged."""
        if self.last is None or (result is not None and not isinstance(result, dict)):
            return result
        return {**(result or {}), PROGRESS_KEY: self.last, PROGRESS_LINES_KEY: self.count}


class _PrintedOnce:
    """Lines of a Ray task as they arrive in the driver: output printed once into the driver's own
    stdout (tagged with the step, as Ray's ``log_to_driver`` tags it), then passed on."""

    def __init__(self, reporter: Reporter, step: str) -> None:
        from marin_resources.ray_connect import driver_prints_step_output

        self.reporter = reporter
        self.step = step
        self.printing = driver_prints_step_output()

    def __call__(self, line: str, metrics: Mapping[str, float], stream: str) -> None:
        if stream != "progress" and self.printing:
            print(f"({self.step}) {line}", file=sys.stdout if stream == "stdout" else sys.stderr, flush=True)
        self.reporter(line, metrics, stream)


def launch_step_function(node: ResolvedStep, config: Any) -> Any:
    """Call the step function (see :func:`_launch`) with its lines going to the reporter the attempt
    installed (:func:`marin_resources.progress.reporting_to`), and their summary added to its metadata."""
    summary = _Summary(current_reporter())
    with reporting_to(summary):
        result = _launch(node, config, summary)
    return summary.added_to(result)


def _in_process(fn: Callable[[Any], Any], config: Any) -> Any:
    """Call ``fn`` here (what it prints reaches its reporter too); when its shards ran as Ray tasks (an explicit Ray shard pool), its metadata
    says where (``marin/ran_on``: ``shard_nodes`` alone, the step itself ran on no Ray node)."""
    from marin_resources.ray_jobs import PLACEMENT_KEY, collecting_shard_nodes, with_shard_nodes

    with collecting_shard_nodes() as shard_nodes, capturing_output():
        result = fn(config)
    if not shard_nodes or (result is not None and not isinstance(result, dict)):
        return result
    return {**(result or {}), PLACEMENT_KEY: with_shard_nodes({}, shard_nodes)}


def _launch(node: ResolvedStep, config: Any, reporter: Reporter) -> Any:
    """Call the step function: on Ray when it is a remote function, declares resources or needs pip
    groups this interpreter lacks, or when ``ray_connect.steps_on_ray()`` (a Ray Client address or
    ``$MARIN_STEPS_ON_RAY=1``: the production topology, heavy work on the Ray worker nodes)."""
    step = node.step
    from marin_resources.runtime_env import runtime_env_for

    runtime_env = runtime_env_for(step.pip_dependency_groups)
    if runs_in_process(step, runtime_env):
        return _in_process(step.fn, config)
    import ray

    from marin_resources.ray_connect import ensure_ray
    from marin_resources.ray_jobs import name_task, recording_placement

    ensure_ray()
    relay = driver_relay()
    forwarder = relay.subscribe(_PrintedOnce(reporter, node.name))
    # Every Ray path records where the step ran (node id, assigned resources) in its metadata, and
    # sends its progress lines and output to this driver's relay.
    if step.resources is not None or not is_ray_remote_function(step.fn):
        from marin_resources.accelerators import step_resources

        # An accelerator config or one of Marin's resource configs, a spec string ("tpu:v4-8"), a
        # dict or None (one CPU): one protocol, StepResources.
        resources = step_resources(step.resources)
        fn = getattr(step.fn, "_function", step.fn)
        # The Ray task is named after the step (not after the innermost wrapper, `fenced`).
        task = name_task(_fenced(run_reporting(recording_placement(fn), forwarder)), node.name)
        try:
            return resources.launch(task, config, runtime_env=runtime_env or None)
        finally:
            relay.unsubscribe(forwarder)
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
        run_reporting(with_secret_environment(recording_placement(step.fn._function), secrets), forwarder)
    )
    remote = ray.remote(**options)(wrapped) if options else ray.remote(wrapped)
    ref = remote.remote(config)
    # Fencing: a runner that loses its lease kills the task instead of letting it keep writing.
    unregister = on_lease_lost(lambda: ray.cancel(ref, force=True))
    try:
        return ray.get(ref)
    finally:
        unregister()
        relay.unsubscribe(forwarder)
