"""Run a graph of steps: skip finished ones, lease the rest, record status (no Dagster import).

Unit of work: a step, or one partition of a partitioned step. For each unit the runner

1. skips it when its ``.executor_status`` is SUCCESS (``cached``);
2. refuses it when FAILED, unless ``force_run_failed``;
3. takes its lease -- when another runner holds a live lease it waits for that runner to finish
   (or for the lease to go stale, or its holder to be provably dead, then takes over);
4. writes RUNNING and ``.executor_info``, calls the step function (in process, or on Ray when
   the function is a Ray remote function or the step declares ``resources``) with its
   ``output_path`` pointing at the attempt's staging folder (:mod:`marin_assets.execution.attempt`:
   the previous attempt's, or a copy of it when its holder may still be alive), rewrites staged
   text files that name the staging folder to name the output, publishes that folder into the
   output while still holding the lease, writes the returned metadata and finally SUCCESS -- or
   FAILED with the traceback.

Dependents of a failed unit are marked DEP_FAILED and not run; the run ends with an
:class:`ExecutorError` that lists the failed steps.

Fencing: status writes are conditional (compare-and-swap on the status the runner last wrote, after
checking the lease is still ours). A runner whose lease is lost while the step runs cancels it
(in-process: an asynchronous ``StepCancelled`` in the step's thread; Ray task: ``ray.cancel``;
train/eval subprocesses: their process group is killed), records nothing -- neither SUCCESS nor
FAILED -- and ends with an :class:`ExecutorError` naming the step. Whatever it wrote is in its own
staging folder, which the runner that took over discarded: never published.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import re
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.attempt import (
    copy_attempt,
    discard_attempts,
    prepare_staging,
    publish,
    relocate_staged_text,
    rewrite_paths,
    staging_path,
)
from marin_assets.execution.conditional import backend_for
from marin_assets.execution.fence import LeaseLostError, StepCancelled, active_fence, on_lease_lost
from marin_assets.execution.lease import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_STALE_S,
    StepLease,
    guard_remote,
    lease_for_output,
)
from marin_assets.execution.secrets import (
    environment_secrets,
    redact_secrets,
    resolve_secrets,
    scrub,
    scrub_values,
    secret_values,
)
from marin_assets.execution.status import (
    INFO_FILE,
    METADATA_FILE,
    STATUS_DEP_FAILED,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    StatusRecord,
    read_status,
    read_status_with_token,
    read_statuses,
    write_json,
    write_status_if,
)
from marin_assets.execution.storage import join_path
from marin_assets.execution.versioning import ResolvedStep, StepGraph, instantiate_config

logger = logging.getLogger("marin.executor")

Unit = tuple[ResolvedStep, str | None]


class StepFailedError(RuntimeError):
    """A step function raised, or the step was FAILED before and not forced."""


class ExecutorError(RuntimeError):
    """The run finished with failed steps; ``failed`` lists ``(name, output path, error)``."""

    def __init__(self, failed: list[tuple[str, str, str]]) -> None:
        self.failed = failed
        lines = "\n".join(
            f"  - {name} ({path}): {error.strip().splitlines()[-1] if error.strip() else '?'}"
            for name, path, error in failed
        )
        super().__init__(f"{len(failed)} step(s) failed:\n{lines}")


@dataclass(frozen=True)
class ExecutorOptions:
    """How the runner behaves.

    Attributes:
        force_run_failed: re-run steps whose status is FAILED instead of raising.
        max_concurrent: how many units run at once (threads; Ray steps run on Ray).
        heartbeat_s / stale_s: lease heartbeat period and the age after which a lease is stale.
        poll_s: how often a waiting runner looks at a step another runner is computing.
        run_id: recorded in every status file this run writes.
    """

    force_run_failed: bool = False
    max_concurrent: int = 4
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stale_s: float = DEFAULT_STALE_S
    poll_s: float = 0.5
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass
class StepOutcome:
    """What happened to one unit."""

    name: str
    output_path: str
    partition: str | None
    action: str  # "ran" | "cached" | "waited" | "failed" | "dep_failed" | "abandoned" (lease lost upstream)
    seconds: float = 0.0
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionReport:
    """Outcomes of a run, in completion order."""

    run_id: str
    outcomes: list[StepOutcome] = field(default_factory=list)

    def by_action(self, action: str) -> list[StepOutcome]:
        """Outcomes with the given action."""
        return [o for o in self.outcomes if o.action == action]

    @property
    def failed(self) -> list[StepOutcome]:
        return [o for o in self.outcomes if o.action in ("failed", "dep_failed")]


def function_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a step function (unwrapping Ray remote functions)."""
    inner = getattr(fn, "_function", fn)
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', repr(inner))}"


def is_ray_remote_function(fn: Any) -> bool:
    """True for a function decorated with ``@ray.remote`` (checked without importing Ray)."""
    return type(fn).__name__ == "RemoteFunction" and type(fn).__module__.startswith("ray.")


def _config_for_info(config: Any) -> Any:
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    return config


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


class StepRunner:
    """Runs units of a :class:`StepGraph` with status files and leases.

    The engine's runner; Marin's public ``Executor`` (:mod:`marin_assets.execution.executor`) and
    ``executor_main`` build a graph and hand it to this class.
    """

    def __init__(
        self, options: ExecutorOptions | None = None, launch: Callable[[ResolvedStep, Any], Any] = launch_step_function
    ) -> None:
        self.options = options or ExecutorOptions()
        self.launch = launch
        # Statuses read in one batch at the start of run(): each unit's first look uses it.
        self._prefetched: dict[str, StatusRecord | None] = {}

    # ----------------------------------------------------------------- planning
    @staticmethod
    def units(graph: StepGraph, run_only: Sequence[str] | None = None) -> list[Unit]:
        """Units to consider, dependencies first (Marin's selection).

        Without ``run_only``: every step reachable from the roots through blocking dependencies; a
        step referenced only through ``.nonblocking()`` is not run (Marin: a pseudo-dependency).
        With ``run_only``: steps whose name matches a regex (``re.search``) plus what they need; a
        matched step that already succeeded does not pull in its dependencies, and a regex that
        matches nothing is reported with a warning.
        """
        nodes = graph.topological()
        keep: set[int] = set()

        def add(node: ResolvedStep, skip_if_done: bool) -> None:
            if id(node) in keep:
                return
            keep.add(id(node))
            if skip_if_done and node.partitioned_by is None:
                status = read_status(node.output_path)
                if status is not None and status.status == STATUS_SUCCESS:
                    return
            for dep in node.dependencies:
                add(dep, skip_if_done)

        if run_only:
            patterns = [re.compile(p) for p in run_only]
            used: set[int] = set()
            for node in nodes:
                matched = [i for i, p in enumerate(patterns) if p.search(node.name)]
                used.update(matched)
                if matched:
                    add(node, skip_if_done=True)
            unused = [p.pattern for i, p in enumerate(patterns) if i not in used]
            if unused:
                logger.warning(
                    "--run_only regexes %s did not match any step; steps are: %s", unused, [n.name for n in nodes]
                )
        else:
            for root in graph.roots:
                add(root, skip_if_done=False)
        nodes = [n for n in nodes if id(n) in keep]
        units: list[Unit] = []
        for node in nodes:
            if node.partitioned_by is None:
                units.append((node, None))
            else:
                units.extend((node, key) for key in graph.partition_keys(node.partitioned_by))
        return units

    @staticmethod
    def unit_dependencies(unit: Unit, graph: StepGraph) -> list[Unit]:
        """Units that run before ``unit``: its inputs, and (``sequential_partitions``) the previous
        partition of its step, an *order* dependency (:meth:`order_dependency`)."""
        node, partition = unit
        deps: list[Unit] = []
        for dep in node.dependencies:
            deps.extend((dep, key) for key in node.partitions_needed(dep, partition, graph))
        previous = StepRunner.order_dependency(unit, graph)
        if previous is not None:
            deps.append(previous)
        return deps

    @staticmethod
    def order_dependency(unit: Unit, graph: StepGraph) -> Unit | None:
        """The previous partition (sorted keys) of a ``sequential_partitions`` step, else None.

        An order dependency, not an input: ``unit`` runs after it has *finished*, whatever the
        outcome. A failed earlier partition (FAILED, DEP_FAILED, or never run because one of its
        own inputs failed) is skipped -- the unit runs against the partitions that succeeded -- so
        one failed drop never stops the later drops' chain (:meth:`effective_predecessor`).
        """
        node, partition = unit
        if not node.step.sequential_partitions or partition is None or node.partitioned_by is None:
            return None
        keys = graph.partition_keys(node.partitioned_by)
        if partition not in keys or keys.index(partition) == 0:
            return None
        return node, keys[keys.index(partition) - 1]

    @staticmethod
    def failed_input(unit: Unit, graph: StepGraph) -> str | None:
        """The label of a FAILED / DEP_FAILED unit that ``unit`` is or transitively needs as an
        input (order dependencies aside; SUCCESS units end the walk), or None."""
        seen: set[tuple[int, str | None]] = set()
        stack = [unit]
        while stack:
            current = stack.pop()
            node, partition = current
            status = read_status(node.partition_output_path(partition))
            if status is not None and status.status in (STATUS_FAILED, STATUS_DEP_FAILED):
                return node.name if partition is None else f"{node.name}[{partition}]"
            if status is not None and status.status == STATUS_SUCCESS:
                continue
            previous = StepRunner.order_dependency(current, graph)
            for dep in StepRunner.unit_dependencies(current, graph):
                key = (id(dep[0]), dep[1])
                if dep != previous and key not in seen:
                    seen.add(key)
                    stack.append(dep)
        return None

    @staticmethod
    def effective_predecessor(unit: Unit, graph: StepGraph) -> tuple[Unit | None, list[str]]:
        """The earlier partition ``unit`` waits for, skipping failed ones; and the skipped keys.

        Walks back from :meth:`order_dependency` over partitions that failed (their own status, or
        an input's: :meth:`failed_input`) to the first one that did not (SUCCESS, running, or not
        started yet), or None when every earlier partition failed.
        """
        skipped: list[str] = []
        previous = StepRunner.order_dependency(unit, graph)
        while previous is not None and StepRunner.failed_input(previous, graph) is not None:
            skipped.append(str(previous[1]))
            previous = StepRunner.order_dependency(previous, graph)
        return previous, skipped

    @staticmethod
    def input_units(unit: Unit, graph: StepGraph) -> list[Unit]:
        """What ``unit`` needs before it runs, as the engine decides it now: its inputs, and the
        earlier partition it waits for (:meth:`effective_predecessor`; failed ones skipped)."""
        previous = StepRunner.order_dependency(unit, graph)
        deps = [d for d in StepRunner.unit_dependencies(unit, graph) if d != previous]
        if previous is not None:
            waited, _ = StepRunner.effective_predecessor(unit, graph)
            if waited is not None:
                deps.append(waited)
        return deps

    # ----------------------------------------------------------------- one unit
    def _lease(self, output_path: str) -> StepLease:
        return lease_for_output(output_path, self.options.heartbeat_s, self.options.stale_s)

    def execute_unit(self, unit: Unit, graph: StepGraph) -> StepOutcome:
        """Bring one unit to SUCCESS (run it, wait for another runner, or find it cached).

        Raises StepFailedError when the step fails, was FAILED before (without force), or a
        dependency is not SUCCESS.
        """
        node, partition = unit
        output_path = node.partition_output_path(partition)
        label = node.name if partition is None else f"{node.name}[{partition}]"
        start = time.monotonic()
        status = self._prefetched.pop(output_path) if output_path in self._prefetched else read_status(output_path)
        if status is not None and status.status == STATUS_SUCCESS:
            return StepOutcome(node.name, output_path, partition, "cached")
        self._check_not_failed(label, output_path, status)
        previous = self.order_dependency(unit, graph)
        for dep_node, dep_partition in self.unit_dependencies(unit, graph):
            if (dep_node, dep_partition) != previous:
                self._await_dependency(label, dep_node, dep_partition)
        if previous is not None:
            self._await_predecessor(label, unit, graph)

        lease = self._lease(output_path)
        announced = False
        while not lease.try_acquire():
            if not announced:
                holder = lease.holder()
                logger.info(
                    "%s: waiting for another runner (%s pid %s) to finish %s",
                    label,
                    holder.host if holder else "?",
                    holder.pid if holder else "?",
                    output_path,
                )
                announced = True
            time.sleep(self.options.poll_s)
            status = read_status(output_path)
            if status is not None and status.status == STATUS_SUCCESS:
                return StepOutcome(node.name, output_path, partition, "waited", time.monotonic() - start)
            if status is not None and status.status == STATUS_FAILED:
                raise StepFailedError(f"{label}: another runner failed computing {output_path}:\n{status.error or ''}")
        try:
            # Re-read under the lease: the previous holder may have finished just before releasing.
            # Its token is what our first status write must still find (fencing).
            status, token = read_status_with_token(output_path, lease.backend)
            if status is not None and status.status == STATUS_SUCCESS:
                return StepOutcome(node.name, output_path, partition, "cached" if not announced else "waited")
            self._check_not_failed(label, output_path, status)
            return self._run_locked(node, partition, output_path, graph, label, start, lease, token, status)
        finally:
            lease.release()

    def _await_dependency(self, label: str, dep_node: ResolvedStep, dep_partition: str | None) -> None:
        """Return when the dependency is SUCCESS; wait while another runner computes it.

        Raises StepFailedError when it is missing, FAILED, or RUNNING without a live lease.
        """
        dep_path = dep_node.partition_output_path(dep_partition)
        lease: StepLease | None = None
        while True:
            dep_status = read_status(dep_path)
            if dep_status is not None and dep_status.status == STATUS_SUCCESS:
                return
            if dep_status is not None and dep_status.status == STATUS_RUNNING:
                lease = lease or self._lease(dep_path)
                if lease.is_held_by_other():
                    time.sleep(self.options.poll_s)
                    continue
            dep_label = dep_node.name if dep_partition is None else f"{dep_node.name}[{dep_partition}]"
            raise StepFailedError(
                f"{label}: dependency {dep_label} at {dep_path} is "
                f"{dep_status.status if dep_status else 'not started'}, not SUCCESS; materialize it first"
            )

    def _await_predecessor(self, label: str, unit: Unit, graph: StepGraph) -> None:
        """Return once the earlier partition ``unit`` waits for is SUCCESS (failed ones skipped,
        with a warning naming them); wait while another runner computes it.

        Raises StepFailedError when it was never started (or its runner died), as for an input.
        """
        leases: dict[str, StepLease] = {}
        warned: list[str] = []
        while True:
            waited, skipped = self.effective_predecessor(unit, graph)
            if skipped and skipped != warned:
                warned = skipped
                logger.warning(
                    "%s: earlier partition(s) %s failed; running against the partitions that succeeded "
                    "(they stay failed until fixed and re-run)",
                    label,
                    ", ".join(skipped),
                )
            if waited is None:
                return
            dep_node, dep_partition = waited
            dep_path = dep_node.partition_output_path(dep_partition)
            dep_status = read_status(dep_path)
            if dep_status is not None and dep_status.status == STATUS_SUCCESS:
                return
            if dep_status is not None and dep_status.status == STATUS_RUNNING:
                if dep_path not in leases:
                    leases[dep_path] = self._lease(dep_path)
                lease = leases[dep_path]
                if lease.is_held_by_other():
                    time.sleep(self.options.poll_s)
                    continue
            raise StepFailedError(
                f"{label}: dependency {dep_node.name}[{dep_partition}] at {dep_path} is "
                f"{dep_status.status if dep_status else 'not started'}, not SUCCESS (partitions of "
                f"{dep_node.name} run in key order); materialize it first"
            )

    def _check_not_failed(self, label: str, output_path: str, status: Any) -> None:
        if status is not None and status.status == STATUS_FAILED and not self.options.force_run_failed:
            detail = (status.error or "").strip().splitlines()
            raise StepFailedError(
                f"{label}: previous run FAILED at {output_path} ({detail[-1] if detail else 'no error recorded'}); "
                "fix the cause and re-run with --force_run_failed"
            )

    @staticmethod
    def _attempt_for(lease: StepLease, label: str, status: StatusRecord | None) -> tuple[str, str | None]:
        """The staging folder this attempt writes to, and the attempt to copy into it first.

        The previous attempt's folder itself when that attempt is known to have stopped (it
        recorded FAILED, released the lease, or its holder is provably dead) -- so a retried
        training step resumes from its checkpoints in place. When its holder may still be alive
        (we took its lease over because it went stale: paused, cut off, on another host), or a
        copy from such an attempt was under way: a fresh folder, into which that attempt is copied
        before it is discarded -- the step still resumes, and the old holder never writes into
        anything this attempt publishes.
        """
        previous = status.attempt if status is not None else None
        if previous and not lease.took_over_live_holder:
            logger.info("%s: resuming in the staging folder of attempt %s", label, previous)
            return previous, None
        source = previous or (status.copying_from if status is not None else None)
        return lease.owner[:16], source

    @staticmethod
    def _fenced_status(
        lease: StepLease, label: str, output_path: str, status: str, token: str | None, **fields: Any
    ) -> str:
        """Write ``status`` only while we hold the lease and nobody changed the status since our
        last write; otherwise the lease is lost: raise LeaseLostError naming the step."""
        try:
            lease.verify()
            new_token = write_status_if(output_path, status, token, lease.backend, **fields)
        except LeaseLostError:
            new_token = None
        if new_token is None:
            lease.lost.set()
            raise LeaseLostError(
                f"{label}: lease on {output_path} was lost (another runner took over); "
                f"{status} was not recorded by this runner"
            )
        return new_token

    def _run_locked(
        self,
        node: ResolvedStep,
        partition: str | None,
        output_path: str,
        graph: StepGraph,
        label: str,
        start: float,
        lease: StepLease,
        token: str | None,
        status: StatusRecord | None,
    ) -> StepOutcome:
        run_id = self.options.run_id
        attempt, copy_from = self._attempt_for(lease, label, status)
        staging = staging_path(output_path, attempt)
        if copy_from is not None:
            # The status names the source while we copy: a runner that takes over from us mid-copy
            # copies again (our half-copied folder is never adopted in place).
            token = self._fenced_status(
                lease, label, output_path, STATUS_RUNNING, token, run_id=run_id, copying_from=copy_from
            )
            discard_attempts(output_path, keep=copy_from)
            copy_start = time.monotonic()
            copied = copy_attempt(staging_path(output_path, copy_from), staging, lease)
            logger.info(
                "%s: continuing from attempt %s, whose holder may still be alive: copied %d files into %s in %.1fs",
                label,
                copy_from,
                copied,
                attempt,
                time.monotonic() - copy_start,
            )
        token = self._fenced_status(lease, label, output_path, STATUS_RUNNING, token, run_id=run_id, attempt=attempt)
        # Every attempt but ours is made unpublishable before our step writes anything (the one we
        # copied from included: what its holder writes from now on lands in discarded objects).
        discard_attempts(output_path, keep=attempt)
        prepare_staging(staging)
        config = instantiate_config(node.step.config, node, partition, graph, output_path=staging)
        write_json(
            join_path(output_path, INFO_FILE),
            redact_secrets(
                {
                    "name": node.name,
                    "partition": partition,
                    "fn": function_name(node.step.fn),
                    "fn_name": function_name(node.step.fn),  # Marin's key for the same
                    "description": node.step.description,
                    "override_output_path": node.step.override_output_path,
                    # As published: the output path, not the staging folder the function writes to.
                    "config": rewrite_paths(_config_for_info(config), staging, output_path),
                    "version": node.version,
                    "hash": node.hash,
                    "output_path": output_path,
                    "attempt": attempt,
                    "dependencies": [d.output_path for d in node.dependencies],
                    "pseudo_dependencies": [d.output_path for d in node.pseudo_dependencies],
                    "pip_dependency_groups": node.step.pip_dependency_groups,
                    "resources": repr(node.step.resources) if node.step.resources is not None else None,
                    "run_id": run_id,
                },
                # The config as given: its EnvSecret values, copied anywhere into it, are hidden too.
                secret_values(config),
            ),
        )
        # The attempt id, not the staging folder: a run's log outlives the folder (discarded at
        # publish), and nothing a run leaves behind may name a path that no longer exists.
        logger.info("%s: running %s -> %s (attempt %s)", label, function_name(node.step.fn), output_path, attempt)
        publishing = False
        try:
            with lease.fencing():
                result = self.launch(node, resolve_secrets(config))
            lease.check()
            # Files the step wrote that name its staging folder (summaries, Levanter's configs)
            # name the output instead. Still adoptable if this fails: paths are all they change.
            relocate_staged_text(staging, output_path, lease)
            # From here the staging folder is half-moved: no later attempt may adopt it.
            token = self._fenced_status(lease, label, output_path, STATUS_RUNNING, token, run_id=run_id)
            publishing = True
            publish(staging, output_path, lease)
        except BaseException as exc:  # noqa: BLE001 - also KeyboardInterrupt: record, then re-raise
            if lease.lost.is_set() or isinstance(exc, (StepCancelled, LeaseLostError)):
                logger.error("%s: lease lost while running; stopped, nothing recorded", label)
                raise LeaseLostError(
                    f"{label}: lease on {output_path} was lost (another runner took over); stopped the step, "
                    "recorded nothing"
                ) from None
            # An error message may quote a secret the step was given: never record or log it.
            hidden = secret_values(config) | environment_secrets()
            raw_error = traceback.format_exc()
            error = scrub(raw_error, hidden)
            # A failed attempt's staging folder (checkpoints...) is what the next attempt resumes from.
            self._fenced_status(
                lease,
                label,
                output_path,
                STATUS_FAILED,
                token,
                run_id=run_id,
                error=error,
                attempt=None if publishing else attempt,
            )
            logger.error("%s: FAILED after %.1fs: %s", label, time.monotonic() - start, scrub(str(exc), hidden))
            if not isinstance(exc, Exception):
                raise
            # The original exception stays chained unless its traceback quotes a secret.
            raise StepFailedError(f"{label} failed: {scrub(str(exc), hidden)}") from (
                None if error != raw_error else exc
            )
        # What a step returns may quote a secret it was given, under any key: scrubbed like errors.
        hidden = secret_values(config) | environment_secrets()
        metadata = scrub_values(result, hidden) if isinstance(result, dict) else {}
        metadata = rewrite_paths(metadata, staging, output_path)  # paths name the published output
        if metadata:
            # As read back (status.read_metadata): secret-named fields and URL credentials hidden.
            write_json(join_path(output_path, METADATA_FILE), redact_secrets(metadata))
        self._fenced_status(lease, label, output_path, STATUS_SUCCESS, token, run_id=run_id)
        with contextlib.suppress(OSError):  # leftovers of stopped attempts: nobody will adopt them now
            discard_attempts(output_path)
        seconds = time.monotonic() - start
        logger.info("%s: SUCCESS in %.1fs", label, seconds)
        return StepOutcome(node.name, output_path, partition, "ran", seconds, metadata=metadata)

    def _mark_dep_failed(self, output_path: str) -> bool:
        """Record DEP_FAILED unless the output is SUCCESS; False when it is SUCCESS.

        Conditional like every status write of the runner: a unit another runner is computing
        under a live lease, or whose status changes meanwhile, is left alone.
        """
        lease = self._lease(output_path)
        status, token = read_status_with_token(output_path, lease.backend)
        if status is not None and status.status == STATUS_SUCCESS:
            return False
        if status is not None and status.status == STATUS_RUNNING and lease.is_held_by_other():
            return True
        write_status_if(output_path, STATUS_DEP_FAILED, token, lease.backend, run_id=self.options.run_id)
        return True

    # ----------------------------------------------------------------- whole graph
    def run(self, graph: StepGraph, run_only: Sequence[str] | None = None) -> ExecutionReport:
        """Run every unit (dependencies first, up to ``max_concurrent`` at once).

        Raises ExecutorError listing the failed steps when any failed.
        """
        backend_for(graph.prefix)  # a store without conditional writes fails here, once, not per step
        units = self.units(graph, run_only)
        self._prefetched = read_statuses([node.partition_output_path(partition) for node, partition in units])
        report = ExecutionReport(self.options.run_id)
        key = lambda u: (id(u[0]), u[1])  # noqa: E731
        by_key = {key(u): u for u in units}
        pending = dict(by_key)
        deps = {k: [key(d) for d in self.unit_dependencies(u, graph)] for k, u in by_key.items()}
        # Order dependencies (sequential_partitions): waited for, but their failure does not propagate.
        order = {k: key(p) for k, u in by_key.items() if (p := self.order_dependency(u, graph)) is not None}
        positions: dict[str, dict[str, int]] = {}
        sequential_index: dict[tuple[int, str | None], int] = {}
        for k, (node, partition) in by_key.items():
            if node.step.sequential_partitions and node.partitioned_by is not None:
                if node.partitioned_by not in positions:
                    keys = graph.partition_keys(node.partitioned_by)
                    positions[node.partitioned_by] = {p: i for i, p in enumerate(keys)}
                if partition in positions[node.partitioned_by]:
                    sequential_index[k] = positions[node.partitioned_by][partition]
        failed: set[tuple[int, str | None]] = set()
        fenced: set[tuple[int, str | None]] = set()  # lease lost: another runner owns them now
        failures: list[tuple[str, str, str]] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.options.max_concurrent)) as pool:
            running: dict[concurrent.futures.Future[StepOutcome], tuple[int, str | None]] = {}
            while pending or running:
                progressed = True
                while progressed:
                    progressed = False
                    in_flight = set(running.values())
                    # A sequential unit starts once every earlier partition of its step in this run has
                    # finished, whatever the outcome (one failed early fast must not let it overtake
                    # the partitions before that one).
                    first_unfinished: dict[int, int] = {}
                    for k in (*pending, *in_flight):
                        if k in sequential_index:
                            index = sequential_index[k]
                            first_unfinished[k[0]] = min(first_unfinished.get(k[0], index), index)
                    for k, unit in list(pending.items()):
                        # Units outside this run (e.g. excluded by run_only) only need their status.
                        blocking = [d for d in deps[k] if d in pending or d in in_flight]
                        if k in sequential_index and first_unfinished[k[0]] < sequential_index[k]:
                            blocking.append(order[k])
                        if any(d in fenced for d in deps[k]):
                            # The runner that took over computes them; writing DEP_FAILED would
                            # flip statuses under its feet.
                            node, partition = unit
                            out = node.partition_output_path(partition)
                            del pending[k]
                            progressed = True
                            fenced.add(k)
                            report.outcomes.append(StepOutcome(node.name, out, partition, "abandoned"))
                        elif any(d in failed for d in deps[k] if d != order.get(k)):
                            node, partition = unit
                            out = node.partition_output_path(partition)
                            del pending[k]
                            progressed = True
                            if not self._mark_dep_failed(out):
                                # An intact earlier result stays valid: never overwrite it.
                                report.outcomes.append(StepOutcome(node.name, out, partition, "cached"))
                                continue
                            report.outcomes.append(StepOutcome(node.name, out, partition, "dep_failed"))
                            failed.add(k)
                        elif not blocking and len(running) < max(1, self.options.max_concurrent):
                            running[pool.submit(self.execute_unit, unit, graph)] = k
                            in_flight.add(k)
                            del pending[k]
                if not running:
                    if pending:  # unreachable unless the dependency graph is inconsistent
                        raise RuntimeError(f"scheduler stuck with {len(pending)} pending units")
                    break
                finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    k = running.pop(future)
                    try:
                        outcome = future.result()
                    except Exception as exc:  # noqa: BLE001 - recorded and reported at the end
                        node, partition = by_key[k]
                        out = node.partition_output_path(partition)
                        outcome = StepOutcome(node.name, out, partition, "failed", error=str(exc))
                        failures.append(
                            (node.name if partition is None else f"{node.name}[{partition}]", out, str(exc))
                        )
                        (fenced if isinstance(exc, LeaseLostError) else failed).add(k)
                    report.outcomes.append(outcome)
        if failures:
            raise ExecutorError(failures)
        return report


def run_steps(
    steps: Iterable[Any],
    prefix: str,
    options: ExecutorOptions | None = None,
    partitions: dict[str, Sequence[str]] | None = None,
    run_only: Sequence[str] | None = None,
) -> ExecutionReport:
    """Resolve ``steps`` under ``prefix`` and run them (the library form of ``executor_main``)."""
    graph = StepGraph(steps, prefix, partitions)
    return StepRunner(options).run(graph, run_only)
