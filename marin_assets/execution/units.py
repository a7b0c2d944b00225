"""Which units a run considers and what each waits for (planning: no status is written here).

A unit is a step, or one partition of a partitioned step: ``(resolved step, partition key or None)``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from marin_assets.execution.status import STATUS_DEP_FAILED, STATUS_FAILED, STATUS_SUCCESS, read_status
from marin_assets.execution.versioning import ResolvedStep, StepGraph

logger = logging.getLogger("marin.executor")

Unit = tuple[ResolvedStep, str | None]


def unit_label(node: ResolvedStep, partition: str | None) -> str:
    """``name`` or ``name[partition]``: how messages name a unit."""
    return node.name if partition is None else f"{node.name}[{partition}]"


def select_units(graph: StepGraph, run_only: Sequence[str] | None = None) -> list[Unit]:
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
    units: list[Unit] = []
    for node in (n for n in nodes if id(n) in keep):
        if node.partitioned_by is None:
            units.append((node, None))
        else:
            units.extend((node, key) for key in graph.partition_keys(node.partitioned_by))
    return units


def unit_dependencies(unit: Unit, graph: StepGraph) -> list[Unit]:
    """Units that run before ``unit``: its inputs, and (``sequential_partitions``) the previous
    partition of its step, an *order* dependency (:func:`order_dependency`)."""
    node, partition = unit
    deps: list[Unit] = []
    for dep in node.dependencies:
        deps.extend((dep, key) for key in node.partitions_needed(dep, partition, graph))
    previous = order_dependency(unit, graph)
    if previous is not None:
        deps.append(previous)
    return deps


def order_dependency(unit: Unit, graph: StepGraph) -> Unit | None:
    """The previous partition (sorted keys) of a ``sequential_partitions`` step, else None.

    An order dependency, not an input: ``unit`` runs after it has *finished*, whatever the
    outcome. A failed earlier partition (FAILED, DEP_FAILED, or never run because one of its
    own inputs failed) is skipped -- the unit runs against the partitions that succeeded -- so
    one failed drop never stops the later drops' chain (:func:`effective_predecessor`).
    """
    node, partition = unit
    if not node.step.sequential_partitions or partition is None or node.partitioned_by is None:
        return None
    keys = graph.partition_keys(node.partitioned_by)
    if partition not in keys or keys.index(partition) == 0:
        return None
    return node, keys[keys.index(partition) - 1]


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
            return unit_label(node, partition)
        if status is not None and status.status == STATUS_SUCCESS:
            continue
        previous = order_dependency(current, graph)
        for dep in unit_dependencies(current, graph):
            key = (id(dep[0]), dep[1])
            if dep != previous and key not in seen:
                seen.add(key)
                stack.append(dep)
    return None


def effective_predecessor(unit: Unit, graph: StepGraph) -> tuple[Unit | None, list[str]]:
    """The earlier partition ``unit`` waits for, skipping failed ones; and the skipped keys.

    Walks back from :func:`order_dependency` over partitions that failed (their own status, or
    an input's: :func:`failed_input`) to the first one that did not (SUCCESS, running, or not
    started yet), or None when every earlier partition failed.
    """
    skipped: list[str] = []
    previous = order_dependency(unit, graph)
    while previous is not None and failed_input(previous, graph) is not None:
        skipped.append(str(previous[1]))
        previous = order_dependency(previous, graph)
    return previous, skipped


def input_units(unit: Unit, graph: StepGraph) -> list[Unit]:
    """What ``unit`` needs before it runs, as the engine decides it now: its inputs, and the
    earlier partition it waits for (:func:`effective_predecessor`; failed ones skipped)."""
    previous = order_dependency(unit, graph)
    deps = [d for d in unit_dependencies(unit, graph) if d != previous]
    if previous is not None:
        waited, _ = effective_predecessor(unit, graph)
        if waited is not None:
            deps.append(waited)
    return deps
