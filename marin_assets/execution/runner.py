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

Where each part lives: which units a run considers (:mod:`~marin_assets.execution.units`), their
order and concurrency (:mod:`~marin_assets.execution.scheduler`), one attempt under a held lease --
staging, status records, publishing (:mod:`~marin_assets.execution.step_attempt`), the step
function's launch in process or on Ray (:mod:`~marin_assets.execution.ray_launch`). This module is
the runner itself: per unit, cached / refused / wait for another runner / take the lease.

Fencing: status writes are conditional (compare-and-swap on the status the runner last wrote, after
checking the lease is still ours). A runner whose lease is lost while the step runs cancels it
(in-process: an asynchronous ``StepCancelled`` in the step's thread; Ray task: ``ray.cancel``;
train/eval subprocesses: their process group is killed), records nothing -- neither SUCCESS nor
FAILED -- and ends with an :class:`ExecutorError` naming the step. Whatever it wrote is in its own
staging folder, which the runner that took over discarded: never published.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from marin_assets.execution.conditional import backend_for
from marin_assets.execution.lease import StepLease, lease_for_output
from marin_assets.execution.outcomes import (
    ExecutionReport,
    ExecutorOptions,
    StepFailedError,
    StepOutcome,
)
from marin_assets.execution.ray_launch import launch_step_function
from marin_assets.execution.reachability import check_store
from marin_assets.execution.scheduler import Scheduler, sequential_positions, unit_key
from marin_assets.execution.status import (
    STATUS_DEP_FAILED,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    StatusRecord,
    host_id,
    read_status,
    read_status_with_token,
    read_statuses,
    write_status_if,
)
from marin_assets.execution.step_attempt import StepAttempt
from marin_assets.execution.units import (
    Unit,
    effective_predecessor,
    order_dependency,
    select_units,
    unit_dependencies,
    unit_label,
)
from marin_assets.execution.versioning import ResolvedStep, StepGraph

__all__ = ["StepRunner", "run_steps"]

logger = logging.getLogger("marin.executor")


class StepRunner:
    """Runs units of a :class:`StepGraph` with status files and leases.

    The engine's runner; Marin's public ``Executor`` (:mod:`marin_assets.execution.executor`) and
    ``executor_main`` build a graph and hand it to this class; the Dagster step op calls
    :meth:`execute_unit` for its own unit.
    """

    def __init__(
        self, options: ExecutorOptions | None = None, launch: Callable[[ResolvedStep, Any], Any] = launch_step_function
    ) -> None:
        self.options = options or ExecutorOptions()
        self.launch = launch
        # Statuses read in one batch at the start of run(): each unit's first look uses it.
        self._prefetched: dict[str, StatusRecord | None] = {}
        # Every lease this runner made, so a stopped run can give up the ones it holds (cancel_running).
        self._leases: list[StepLease] = []
        self._leases_lock = threading.Lock()

    def _lease(self, output_path: str) -> StepLease:
        lease = lease_for_output(output_path, self.options.heartbeat_s, self.options.stale_s)
        with self._leases_lock:
            self._leases.append(lease)
        return lease

    def cancel_running(self, why: str) -> list[str]:
        """Stop the units running now (the run driving them was terminated or interrupted): their
        leases are given up, which cancels their Ray tasks or subprocesses and records nothing
        (:meth:`StepLease.cancel`) -- none keeps running unobserved after its run is gone. Returns
        the output folders of the steps it stopped."""
        with self._leases_lock:
            leases, self._leases = self._leases, []
        return [lease.path.rsplit("/", 1)[0] for lease in leases if lease.cancel(why)]

    # ----------------------------------------------------------------- one unit
    def execute_unit(self, unit: Unit, graph: StepGraph) -> StepOutcome:
        """Bring one unit to SUCCESS (run it, wait for another runner, or find it cached).

        Raises StepFailedError when the step fails, was FAILED before (without force), a
        dependency is not SUCCESS, or its lease cannot be written; StoreUnreachableError when its
        object store cannot be reached; LeaseLostError when the lease is lost while it runs.
        """
        node, partition = unit
        output_path = node.partition_output_path(partition)
        label = unit_label(node, partition)
        start = time.monotonic()
        check_store(output_path, [label])  # seconds, not a minute of client retries (cached per store)
        status = self._prefetched.pop(output_path) if output_path in self._prefetched else read_status(output_path)
        if status is not None and status.status == STATUS_SUCCESS:
            return StepOutcome(node.name, output_path, partition, "cached")
        self._check_not_failed(label, output_path, status)
        previous = order_dependency(unit, graph)
        for dep_node, dep_partition in unit_dependencies(unit, graph):
            if (dep_node, dep_partition) != previous:
                self._await_dependency(label, dep_node, dep_partition)
        if previous is not None:
            self._await_predecessor(label, unit, graph)
        lease = self._lease(output_path)
        waited = self._acquire(lease, unit, label, start)
        if isinstance(waited, StepOutcome):
            return waited
        try:
            # Re-read under the lease: the previous holder may have finished just before releasing.
            # Its token is what our first status write must still find (fencing).
            status, token = read_status_with_token(output_path, lease.backend)
            if status is not None and status.status == STATUS_SUCCESS:
                return StepOutcome(node.name, output_path, partition, "waited" if waited else "cached")
            self._check_not_failed(label, output_path, status)
            attempt = StepAttempt(
                node,
                partition,
                graph,
                lease,
                token,
                status,
                self.options.run_id,
                self.launch,
                start,
                listeners=self.options.listeners,
                secret_name_rule=self.options.secret_name_rule,
            )
            return attempt.run()
        finally:
            lease.release()

    def _acquire(self, lease: StepLease, unit: Unit, label: str, start: float) -> bool | StepOutcome:
        """Take the lease, waiting while another runner holds it live. Returns whether we waited,
        or the outcome when the other runner finished the unit meanwhile."""
        node, partition = unit
        output_path = node.partition_output_path(partition)
        announced = False
        while True:
            try:
                if lease.try_acquire():
                    return announced
            except OSError as exc:  # a full disk, a read-only folder: the engine's one line
                raise StepFailedError(
                    f"{label}: cannot write the lease at {output_path} on host {host_id()}: {exc}"
                ) from None
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
            raise StepFailedError(
                f"{label}: dependency {unit_label(dep_node, dep_partition)} at {dep_path} is "
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
            waited, skipped = effective_predecessor(unit, graph)
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
                if leases[dep_path].is_held_by_other():
                    time.sleep(self.options.poll_s)
                    continue
            raise StepFailedError(
                f"{label}: dependency {dep_node.name}[{dep_partition}] at {dep_path} is "
                f"{dep_status.status if dep_status else 'not started'}, not SUCCESS (partitions of "
                f"{dep_node.name} run in key order); materialize it first"
            )

    def _check_not_failed(self, label: str, output_path: str, status: StatusRecord | None) -> None:
        if status is not None and status.status == STATUS_FAILED and not self.options.force_run_failed:
            detail = (status.error or "").strip().splitlines()
            raise StepFailedError(
                f"{label}: previous run FAILED at {output_path} ({detail[-1] if detail else 'no error recorded'}); "
                "fix the cause and re-run with --force_run_failed"
            )

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
    def run(
        self,
        graph: StepGraph,
        run_only: Sequence[str] | None = None,
        *,
        units: Sequence[Unit] | None = None,
        stop: threading.Event | None = None,
    ) -> ExecutionReport:
        """Run every unit (dependencies first, up to ``max_concurrent`` at once), telling
        ``options.listeners`` what happens to each (:mod:`marin_assets.execution.events`).

        ``units``: exactly these units instead of ``run_only``'s selection (the Dagster op's).
        ``stop``: once set, no further unit starts (each fails "not started"); running ones finish.
        Raises ExecutorError listing the failed steps when any failed.
        """
        backend_for(graph.prefix)  # a store without conditional writes fails here, once, not per step
        check_store(graph.prefix, sorted(node.name for node in graph.topological()))
        if self.options.description:
            from marin_resources.ray_jobs import describe_driver

            # Ray's job list names what this driver runs (its tasks are named after the steps).
            describe_driver(self.options.description, f"the Ray tasks of {self.options.description}")
        units = list(units) if units is not None else select_units(graph, run_only)

        def execute(unit: Unit) -> StepOutcome:
            if stop is not None and stop.is_set():
                raise StepFailedError(f"{unit_label(*unit)}: not started, the run was stopped")
            return self.execute_unit(unit, graph)

        self._prefetched = read_statuses([node.partition_output_path(partition) for node, partition in units])
        scheduler = Scheduler(
            units=units,
            dependencies={unit_key(u): [unit_key(d) for d in unit_dependencies(u, graph)] for u in units},
            order={unit_key(u): unit_key(p) for u in units if (p := order_dependency(u, graph)) is not None},
            sequential_index=sequential_positions(units, graph),
            execute=execute,
            mark_dep_failed=self._mark_dep_failed,
            max_concurrent=self.options.max_concurrent,
            report=ExecutionReport(self.options.run_id),
            listeners=self.options.listeners,
        )
        return scheduler.run()


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
