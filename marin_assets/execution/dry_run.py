"""Explain what a run would do, and why a step must run again (no Dagster import)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from marin_assets.execution.lease import lease_for_output
from marin_assets.execution.secrets import REDACTED, redact_secrets
from marin_assets.execution.status import (
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    read_info,
    read_status,
)
from marin_assets.execution.storage import join_path, list_dir
from marin_assets.execution.units import select_units, unit_dependencies
from marin_assets.execution.versioning import HASH_LENGTH, ResolvedStep, StepGraph, canonical_version
from marin_resources.secret_rule import is_secret_name


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
    """Every flattened difference between two version dicts (both read in canonical form).

    A changed secret-looking field still shows as changed, but its values print as ``***``.
    """
    a, b = flatten_version(canonical_version(old)), flatten_version(canonical_version(new))

    def shown(key: str, value: Any) -> str:
        secret = isinstance(value, str) and value and is_secret_name(key.rsplit(".", 1)[-1].split("[", 1)[0])
        return repr(REDACTED if secret else value)

    lines: list[str] = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            lines.append(f"+ {key} = {shown(key, b[key])}")
        elif key not in b:
            lines.append(f"- {key} (was {shown(key, a[key])})")
        elif a[key] != b[key]:
            lines.append(f"~ {key}: {shown(key, a[key])} -> {shown(key, b[key])}")
    return lines


def _consumed_by_name(version: dict[str, Any]) -> dict[str, list[str]]:
    """``consumed_partitions`` keyed by the producing step's name (its ``-<hash>`` suffix removed)."""
    consumed = version.get("consumed_partitions") or {}
    return {key.rpartition("-")[0] or key: list(keys) for key, keys in consumed.items()}


def _by_name(versions: list[Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in versions if isinstance(v, dict) and "name" in v}


def root_causes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Why ``new`` differs from ``old`` (two versions of one step), each root cause named first.

    * ``config.lr: 0.003 -> 0.001`` -- a versioned config value of this step;
    * ``new partition drop-004 of curation/consolidated consumed by tokenized/x`` -- a step that
      reads every partition saw a new (or lost an old) partition;
    * ``<cause> (via dependency A -> B)`` -- the cause lies in a dependency (A), which reaches this
      step through B; one line per root cause, never the dependency's whole version diff.
    """
    old, new = canonical_version(old), canonical_version(new)
    name = new.get("name", "?")
    causes: list[str] = []
    old_config, new_config = old.get("config", {}), new.get("config", {})
    for key in sorted(set(old_config) | set(new_config)):
        if key not in old_config:
            causes.append(f"config.{key}: added = {new_config[key]!r}")
        elif key not in new_config:
            causes.append(f"config.{key}: removed (was {old_config[key]!r})")
        elif old_config[key] != new_config[key]:
            causes.extend(_value_changes(f"config.{key}", old_config[key], new_config[key]))
    old_consumed, new_consumed = _consumed_by_name(old), _consumed_by_name(new)
    for producer in sorted(set(old_consumed) | set(new_consumed)):
        before, after = old_consumed.get(producer, []), new_consumed.get(producer, [])
        added = [k for k in after if k not in before]
        removed = [k for k in before if k not in after]
        if added:
            noun = "partition" if len(added) == 1 else "partitions"
            causes.append(f"new {noun} {', '.join(added)} of {producer} consumed by {name}")
        if removed:
            noun = "partition" if len(removed) == 1 else "partitions"
            causes.append(f"{noun} {', '.join(removed)} of {producer} no longer consumed by {name}")
    for field in ("dependencies", "pseudo_dependencies"):
        old_deps, new_deps = _by_name(old.get(field, [])), _by_name(new.get(field, []))
        for dep_name in new_deps:
            if dep_name not in old_deps:
                causes.append(f"new dependency {dep_name}")
            elif old_deps[dep_name] != new_deps[dep_name]:
                for cause in root_causes(old_deps[dep_name], new_deps[dep_name]) or ["its version changed"]:
                    causes.append(_via(cause, dep_name))
        causes.extend(f"dependency {dep_name} removed" for dep_name in old_deps if dep_name not in new_deps)
    if not causes and old != new:
        causes = version_diff(old, new)
    return causes


_REPR = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.DOTALL)


def _repr_fields(text: str) -> dict[str, str] | None:
    """``Name(a=1, b='x')`` (a versioned dataclass as Marin's encoder stores it) -> its fields."""
    match = _REPR.match(text)
    if not match:
        return None
    fields: dict[str, str] = {}
    depth, quote, start, body = 0, "", 0, match.group(2)
    for i, char in enumerate(f"{body},"):
        if quote:
            quote = "" if char == quote and body[i - 1 : i] != "\\" else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            item = body[start:i].strip()
            start = i + 1
            if not item:
                continue
            name, eq, value = item.partition("=")
            if not eq or not name.strip().isidentifier():
                return None
            fields[name.strip()] = value.strip()
    return fields


def _value_changes(key: str, old: Any, new: Any, from_repr: bool = False) -> list[str]:
    """``key: old -> new``, narrowed to the changed fields when both are dataclass reprs.

    ``from_repr``: the values are already source text (fields of a repr), shown as they are.
    """
    if isinstance(old, str) and isinstance(new, str):
        old_fields, new_fields = _repr_fields(old), _repr_fields(new)
        if old_fields is not None and new_fields is not None and old.split("(")[0] == new.split("(")[0]:
            changes = []
            for name in [*new_fields, *(n for n in old_fields if n not in new_fields)]:
                before, after = old_fields.get(name, "<unset>"), new_fields.get(name, "<unset>")
                if before != after:
                    changes.extend(_value_changes(f"{key}.{name}", before, after, from_repr=True))
            if changes:
                return changes
        if from_repr or old_fields is not None or new_fields is not None:
            return [f"{key}: {old} -> {new}"]
    return [f"{key}: {old!r} -> {new!r}"]


def _via(cause: str, dependency: str) -> str:
    """``cause`` of ``dependency``, with the dependency chain it travelled appended."""
    marker = " (via dependency "
    if cause.startswith("config."):
        cause = f"{dependency} {cause}"  # whose config changed
    if cause.endswith(")") and marker in cause:
        root, _, chain = cause.rpartition(marker)
        return f"{root}{marker}{chain[:-1]} -> {dependency})"
    return f"{cause}{marker}{dependency})"


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
    for unit in select_units(graph, run_only):
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
        upstream = [d for d in unit_dependencies(unit, graph) if (id(d[0]), d[1]) in will_run]
        reason, changes = explain_run(node, partition, status.status if status is not None else None)
        if upstream:
            reason += f"; after {len(upstream)} upstream unit(s) that will run"
        will_run.add((id(node), partition))
        planned.append(PlannedUnit(node.name, partition, out, "run", reason, changes))
    return planned


def explain_run(node: ResolvedStep, partition: str | None, status: str | None = None) -> tuple[str, list[str]]:
    """Why the unit must run: ``(reason naming the root cause first, every root cause)``.

    ``status`` is the unit's current status (None: never started here).
    """
    if status is not None:
        return f"previous attempt here is {status}", []
    previous = previous_version(node, partition)
    if previous is None:
        if partition is not None and _has_other_partitions(node):
            return f"new partition {partition} of {node.name}", []
        return "new: no earlier output of this step", []
    # Both sides redacted: a changed credential shows only as "version changed", never by value.
    causes = root_causes(redact_secrets(previous[1]), redact_secrets(node.version))
    if not causes:
        return f"version changed since {previous[0]}", []
    more = f" (+{len(causes) - 1} more)" if len(causes) > 1 else ""
    return f"{causes[0]}{more}; previous output {previous[0]}", causes


def _has_other_partitions(node: ResolvedStep) -> bool:
    """True when some partition of this step (any version) was computed before."""
    parent = node.output_path.rpartition("/")[0]
    pattern = re.compile(rf"^{re.escape(node.name.rpartition('/')[2])}-[0-9a-f]{{{HASH_LENGTH}}}$")
    for entry in list_dir(parent):
        entry_name = entry["name"].rstrip("/").rpartition("/")[2]
        if pattern.match(entry_name) and list_dir(f"{parent}/{entry_name}"):
            return True
    return False


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
