"""Run units dependencies first, up to ``max_concurrent`` at once, on a thread pool.

The scheduler knows only the order: a unit starts when none of its dependencies is pending or
running (a partition of a ``sequential_partitions`` step also waits for every earlier partition of
its step to finish, whatever the outcome); a unit whose *input* failed is marked DEP_FAILED
(``mark_dep_failed``) and not run -- a failed earlier partition, an order dependency only, does not
propagate; a unit
whose dependency lost its lease is *abandoned* -- the runner that took that dependency over computes
it, and writing DEP_FAILED would flip statuses under its feet. What running one unit means is the
``execute`` callable's business (:meth:`marin_assets.execution.runner.StepRunner.execute_unit`).

This is the one place that decides what runs when and how many at once, for ``executor_main``,
Marin's ``Executor`` and the Dagster op alike. It tells the run's stream how each unit ended
(:mod:`marin_assets.execution.events`): ``Done`` (ran, cached, waited; with its seconds and metadata),
``Failed`` (seconds, the error's last line as cause, the error) or ``NotRun`` (the failed input, or
``abandoned``); the run's :class:`ExecutionReport` is one listener of it, the front ends are others.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from marin_assets.execution.events import Done, EventListener, Failed, NotRun, StepEvent, emit
from marin_assets.execution.fence import LeaseLostError
from marin_assets.execution.outcomes import ExecutionReport, ExecutorError, StepOutcome
from marin_assets.execution.units import Unit, unit_label
from marin_assets.execution.versioning import StepGraph

Key = tuple[int, str | None]


def unit_key(unit: Unit) -> Key:
    return id(unit[0]), unit[1]


def sequential_positions(units: list[Unit], graph: StepGraph) -> dict[Key, int]:
    """The position of each unit of a ``sequential_partitions`` step among its step's keys."""
    positions: dict[str, dict[str, int]] = {}
    found: dict[Key, int] = {}
    for node, partition in units:
        if node.step.sequential_partitions and node.partitioned_by is not None:
            if node.partitioned_by not in positions:
                keys = graph.partition_keys(node.partitioned_by)
                positions[node.partitioned_by] = {p: i for i, p in enumerate(keys)}
            if partition in positions[node.partitioned_by]:
                found[unit_key((node, partition))] = positions[node.partitioned_by][partition]
    return found


@dataclass
class Scheduler:
    """One run's bookkeeping: what is pending, running, failed or fenced (lease lost)."""

    units: list[Unit]
    dependencies: dict[Key, list[Key]]
    execute: Callable[[Unit], StepOutcome]
    mark_dep_failed: Callable[[str], bool]  # output path -> False when it is SUCCESS (left alone)
    max_concurrent: int
    report: ExecutionReport
    # Order dependencies (sequential_partitions: the previous partition): waited for, but their
    # failure does not propagate; and each sequential unit's position among its step's keys.
    order: dict[Key, Key] = field(default_factory=dict)
    sequential_index: dict[Key, int] = field(default_factory=dict)
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    listeners: Sequence[EventListener] = ()

    def __post_init__(self) -> None:
        self.max_concurrent = max(1, self.max_concurrent)
        self.by_key = {unit_key(u): u for u in self.units}
        self.pending = dict(self.by_key)
        self.failed: set[Key] = set()
        self.fenced: set[Key] = set()  # lease lost: another runner owns them now
        self.running: dict[concurrent.futures.Future[StepOutcome], Key] = {}
        self.started: dict[Key, float] = {}

    def tell(self, event: StepEvent) -> None:
        """The report first (it must hold every unit), then the listeners; none can fail the run."""
        emit([self.report.record, *self.listeners], event)

    def run(self) -> ExecutionReport:
        """Run every unit; raise ExecutorError listing the failed ones."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.max_concurrent) as pool:
            while self.pending or self.running:
                while self._settle(pool):
                    pass
                if not self.running:
                    if self.pending:  # unreachable unless the dependency graph is inconsistent
                        raise RuntimeError(f"scheduler stuck with {len(self.pending)} pending units")
                    break
                finished, _ = concurrent.futures.wait(self.running, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    self._collect(future)
        if self.failures:
            raise ExecutorError(self.failures, self.report)
        return self.report

    def _settle(self, pool: concurrent.futures.Executor) -> bool:
        """One pass over the pending units: drop those a failed or fenced dependency blocks, start
        the ready ones while there is room. True when anything changed."""
        progressed = False
        in_flight = set(self.running.values())
        # A sequential unit starts once every earlier partition of its step in this run has
        # finished, whatever the outcome (one that failed early must not let a later one overtake
        # the partitions before it).
        first_unfinished: dict[int, int] = {}
        for k in (*self.pending, *in_flight):
            if k in self.sequential_index:
                index = self.sequential_index[k]
                first_unfinished[k[0]] = min(first_unfinished.get(k[0], index), index)
        for k, unit in list(self.pending.items()):
            # Units outside this run (e.g. excluded by run_only) only need their status.
            blocking = [d for d in self.dependencies[k] if d in self.pending or d in in_flight]
            if k in self.sequential_index and first_unfinished[k[0]] < self.sequential_index[k]:
                blocking.append(self.order[k])
            fenced = [d for d in self.dependencies[k] if d in self.fenced]
            failed = [d for d in self.dependencies[k] if d in self.failed and d != self.order.get(k)]
            if fenced:
                self._drop(k, "abandoned", f"the lease of input {unit_label(*self.by_key[fenced[0]])} was lost")
                self.fenced.add(k)
                progressed = True
            elif failed:
                node, partition = unit
                if self.mark_dep_failed(node.partition_output_path(partition)):
                    self._drop(k, "dep_failed", f"input {unit_label(*self.by_key[failed[0]])} failed")
                    self.failed.add(k)
                else:
                    self._drop(k, "cached")  # an intact earlier result stays valid: never overwritten
                progressed = True
            elif not blocking and len(self.running) < self.max_concurrent:
                self.started[k] = time.monotonic()
                self.running[pool.submit(self.execute, unit)] = k
                in_flight.add(k)
                del self.pending[k]
        return progressed

    def _drop(self, k: Key, action: str, cause: str = "") -> None:
        node, partition = self.pending.pop(k)
        out = node.partition_output_path(partition)
        if action == "cached":
            self.tell(Done(node.name, partition, out, action="cached"))
        else:
            self.tell(NotRun(node.name, partition, out, cause=cause, action=action))

    def _collect(self, future: concurrent.futures.Future[StepOutcome]) -> None:
        k = self.running.pop(future)
        node, partition = self.by_key[k]
        out = node.partition_output_path(partition)
        try:
            outcome = future.result()
        except BaseException as exc:  # noqa: BLE001 - recorded and reported at the end of the run
            error = str(exc)
            self.failures.append((unit_label(node, partition), out, error))
            (self.fenced if isinstance(exc, LeaseLostError) else self.failed).add(k)
            lines = error.strip().splitlines()
            seconds = time.monotonic() - self.started.pop(k, time.monotonic())
            self.tell(
                Failed(
                    node.name,
                    partition,
                    out,
                    seconds=seconds,
                    cause=lines[-1] if lines else type(exc).__name__,
                    error=error,
                )
            )
            if not isinstance(exc, Exception):  # a step that called sys.exit(): told, then the run stops
                raise
            return
        self.started.pop(k, None)
        self.tell(
            Done(
                outcome.name,
                outcome.partition,
                outcome.output_path,
                action=outcome.action,
                seconds=outcome.seconds,
                metadata=outcome.metadata,
            )
        )
