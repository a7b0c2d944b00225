"""Explain what a run would do, and why a step must run again (no Dagster import)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from marin_assets.execution.lease import lease_for_output
from marin_assets.execution.runner import Executor
from marin_assets.execution.status import (
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    read_info,
    read_status,
)
from marin_assets.execution.storage import join_path, list_dir
from marin_assets.execution.versioning import HASH_LENGTH, ResolvedStep, StepGraph


@dataclass
class PlannedUnit:
    """What a run would do with one unit, and why."""

    name: str
    partition: str | None
    output_path: str
    action: str  # "skip" | "run" | "wait" | "fail"
    reason: str
    changes: list[str]


def flatten_version(version: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten a version dict into dotted keys (``dependencies[0].config.lr`` ...)."""
    flat: dict[str, Any] = {}
    if isinstance(version, dict):
        for key, value in version.items():
            flat.update(flatten_version(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(version, list):
        if not version:
            flat[prefix] = []
        for i, value in enumerate(version):
            flat.update(flatten_version(value, f"{prefix}[{i}]"))
    else:
        flat[prefix] = version
    return flat


def version_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two version dicts."""
    a, b = flatten_version(old), flatten_version(new)
    lines: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            lines.append(f"+ {key} = {b[key]!r}")
        elif key not in b:
            lines.append(f"- {key} (was {a[key]!r})")
        elif a[key] != b[key]:
            lines.append(f"~ {key}: {a[key]!r} -> {b[key]!r}")
    return lines


def previous_version(node: ResolvedStep, partition: str | None) -> tuple[str, dict[str, Any]] | None:
    """The most recent earlier output of the same step name (another hash) and its version."""
    parent, _, base = node.output_path.rpartition("/")
    pattern = re.compile(rf"^{re.escape(node.name.rpartition('/')[2])}-[0-9a-f]{{{HASH_LENGTH}}}$")
    best: tuple[float, str, dict[str, Any]] | None = None
    for entry in list_dir(parent):
        entry_name = entry["name"].rstrip("/").rpartition("/")[2]
        if entry_name == base or not pattern.match(entry_name):
            continue
        candidate = f"{parent}/{entry_name}"
        if partition is not None:
            candidate = join_path(candidate, partition)
        info = read_info(candidate)
        if not info or "version" not in info:
            continue
        status = read_status(candidate)
        stamp = status.time if status else 0.0
        if best is None or stamp > best[0]:
            best = (stamp, candidate, info["version"])
    return (best[1], best[2]) if best else None


def plan(graph: StepGraph, run_only: list[str] | None = None, force_run_failed: bool = False) -> list[PlannedUnit]:
    """What ``executor_main`` would do for every unit, without running anything."""
    planned: list[PlannedUnit] = []
    will_run: set[tuple[int, str | None]] = set()
    for unit in Executor.units(graph, run_only):
        node, partition = unit
        out = node.partition_output_path(partition)
        status = read_status(out)
        changes: list[str] = []
        if status is not None and status.status == STATUS_SUCCESS:
            planned.append(PlannedUnit(node.name, partition, out, "skip", "SUCCESS", []))
            continue
        if status is not None and status.status == STATUS_FAILED and not force_run_failed:
            planned.append(PlannedUnit(node.name, partition, out, "fail", "FAILED before; use --force_run_failed", []))
            continue
        if status is not None and status.status == STATUS_RUNNING and _lease_is_live(out):
            planned.append(PlannedUnit(node.name, partition, out, "wait", "RUNNING under a live lease elsewhere", []))
            continue
        upstream = [d for d in Executor.unit_dependencies(unit, graph) if (id(d[0]), d[1]) in will_run]
        if status is not None:
            reason = f"previous attempt here is {status.status}"
        else:
            previous = previous_version(node, partition)
            if previous is None:
                reason = "new: no earlier output of this step"
            else:
                changes = version_diff(previous[1], node.version)
                reason = f"version changed since {previous[0]}"
        if upstream:
            reason += f"; after {len(upstream)} upstream unit(s) that will run"
        will_run.add((id(node), partition))
        planned.append(PlannedUnit(node.name, partition, out, "run", reason, changes))
    return planned


def _lease_is_live(output_path: str) -> bool:
    return lease_for_output(output_path).is_held_by_other()


def format_plan(planned: list[PlannedUnit]) -> str:
    """The dry-run report as text."""
    lines = []
    for p in planned:
        label = p.name if p.partition is None else f"{p.name}[{p.partition}]"
        lines.append(f"{p.action:5s} {label}  {p.output_path}  ({p.reason})")
        lines.extend(f"        {change}" for change in p.changes)
    counts = {a: sum(1 for p in planned if p.action == a) for a in ("skip", "run", "wait", "fail")}
    lines.append("dry run: " + ", ".join(f"{n} {a}" for a, n in counts.items()))
    return "\n".join(lines)
