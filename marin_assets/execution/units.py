"""Which units a run considers and what each waits for (planning: no status is written here).

A unit is a step, or one partition of a partitioned step: ``(resolved step, partition key or None)``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from marin_assets.execution.status import STATUS_SUCCESS, read_status
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
    """Units that must be SUCCESS before ``unit`` runs (its inputs' partitions; for a step with
    ``sequential_partitions``, also its own previous partition)."""
    node, partition = unit
    deps: list[Unit] = []
    for dep in node.dependencies:
        deps.extend((dep, key) for key in node.partitions_needed(dep, partition, graph))
    if node.step.sequential_partitions and partition is not None and node.partitioned_by is not None:
        keys = graph.partition_keys(node.partitioned_by)
        if partition in keys and keys.index(partition) > 0:
            deps.append((node, keys[keys.index(partition) - 1]))
    return deps
