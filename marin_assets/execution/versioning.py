"""Versions, output paths and config instantiation (Marin's algorithm, no I/O).

The version of a step is ``{"name", "config", "dependencies"}`` (plus ``"pseudo_dependencies"``
when the step has any), exactly as Marin's ``Executor.compute_version`` builds it:

* ``config`` maps the dotted path of every versioned field to its value. Dataclass fields and dict
  keys are joined with ``.``; list items add ``.[i]`` (Marin's ``new_prefix + f"[{i}]"``, so a list
  field ``files`` gives ``files.[0]``).
* every reference to another step (``InputName``, a bare ``ExecutorStep``, ``.nonblocking()``)
  counts, in walk order, with one counter shared by blocking and non-blocking references: the
  i-th reference is ``DEP[i]`` (``DEP[i]/sub`` for a path below the output). A step referenced twice
  takes two indices and appears twice in ``dependencies`` -- Marin does not de-duplicate.
* ``dependencies`` / ``pseudo_dependencies`` hold the full version dict of each reference, in order.
* values are encoded like Marin's ``CustomJsonEncoder``: JSON types as themselves, ``timedelta`` as
  ``{"days", "seconds", "microseconds"}``, anything else -- a versioned dataclass, an Enum -- as
  ``str(value)`` (its repr), so nested dataclasses hash by their repr, not field by field.

The hash is the first 6 hex characters of the md5 of the version's JSON with sorted keys; the
output path is ``<prefix>/<name>-<hash>``.

One intended difference from Marin: a hardcoded path *under the prefix* enters the version
relative to the prefix (Marin stores the absolute path), so the same experiment hashes identically
on any bucket or local folder. Hardcoded paths elsewhere, and relative ones, are stored as written,
as in Marin. Two additions that only apply to features Marin does not have (data-drop partitions):

* a reference to one fixed partition is recorded as ``DEP[i]@<key>``, a reference to every
  partition as ``DEP[i]/*``;
* an unpartitioned step that consumes every partition of a partitioned step records the sorted
  partition keys it read (``consumed_partitions``), so adding a data drop gives it a new path.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    OutputName,
    PartitionKeyName,
    VersionedValue,
    validate_partition_key,
)
from marin_assets.execution.storage import join_path, local_prefix

HASH_LENGTH = 6

logger = logging.getLogger(__name__)


def _json_default(obj: Any) -> Any:
    """Encode what JSON cannot, like Marin's ``CustomJsonEncoder`` (``str(obj)`` as the fallback)."""
    if isinstance(obj, datetime.timedelta):
        return {"days": obj.days, "seconds": obj.seconds, "microseconds": obj.microseconds}
    if isinstance(obj, (set, frozenset)):
        # Marin writes str(set), whose order depends on the hash seed; sorted is reproducible.
        return sorted(obj, key=repr)
    return str(obj)


def version_json(version: Mapping[str, Any]) -> str:
    """Canonical JSON of a version dict (sorted keys) -- the text that is hashed."""
    return json.dumps(version, sort_keys=True, default=_json_default)


def canonical_version(version: Mapping[str, Any]) -> dict[str, Any]:
    """The one stored form of a version: the JSON that is hashed, parsed back.

    Tuples become lists and every value JSON cannot hold becomes what Marin's encoder writes for it
    (``str(value)`` for a versioned dataclass or Enum, a dict for a ``timedelta``), so a version read
    back from ``.executor_info`` compares equal to a freshly computed one.
    """
    return json.loads(version_json(version))


def hash_version(version: Mapping[str, Any]) -> str:
    """The 6-hex-character hash of a version dict."""
    return _hash_text(version_json(version))


def _hash_text(text: str) -> str:
    """The 6-hex-character hash of a version's canonical JSON."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def relative_to_prefix(path: str, prefix: str) -> str | None:
    """``path`` relative to ``prefix`` when it lies below it, else None."""
    root = prefix.rstrip("/") + "/"
    if path.startswith(root):
        return path[len(root) :]
    return None


@dataclass
class _Collected:
    """What a walk over one config found."""

    config_version: dict[str, Any] = field(default_factory=dict)
    dependencies: list[ResolvedStep] = field(default_factory=list)
    pseudo_dependencies: list[ResolvedStep] = field(default_factory=list)
    dependency_refs: list[ResolvedStep] = field(default_factory=list)
    """Every reference, in walk order (a step referenced twice is listed twice, as Marin does)."""
    pseudo_dependency_refs: list[ResolvedStep] = field(default_factory=list)
    all_partition_inputs: list[ResolvedStep] = field(default_factory=list)
    specific_partition_inputs: list[tuple[ResolvedStep, str]] = field(default_factory=list)
    same_partition_inputs: list[ResolvedStep] = field(default_factory=list)


def _walk_config(
    obj: Any, prefix: str, collected: _Collected, output_prefix: str, resolve: Callable[[ExecutorStep], ResolvedStep]
) -> None:
    """Record versioned values and dependencies of ``obj`` under the dotted path ``prefix``.

    The walk order and the keys are Marin's ``collect_dependencies_and_version``.
    """
    if obj is None:
        return
    child_prefix = f"{prefix}." if prefix else ""
    if isinstance(obj, ExecutorStep):
        obj = InputName(step=obj)
    if isinstance(obj, InputName):
        if obj.step is None:
            name = obj.name or ""
            rel = relative_to_prefix(name, output_prefix)
            collected.config_version[prefix] = rel if rel is not None else name
            return
        # Marin: one counter over blocking and non-blocking references, every reference counts.
        index = len(collected.dependency_refs) + len(collected.pseudo_dependency_refs)
        dep = resolve(obj.step)
        if obj.block_on_step:
            collected.dependency_refs.append(dep)
            deps = collected.dependencies
        else:
            collected.pseudo_dependency_refs.append(dep)
            deps = collected.pseudo_dependencies
        # For running, a dependency is one node however often it is referenced (identical upstream
        # steps are merged into their canonical node).
        if not any(d is dep for d in deps):
            deps.append(dep)
        if obj.all_partitions:
            if not any(d is dep for d in collected.all_partition_inputs):
                collected.all_partition_inputs.append(dep)
        elif obj.partition is not None:
            if (dep, obj.partition) not in collected.specific_partition_inputs:
                collected.specific_partition_inputs.append((dep, obj.partition))
        elif not any(d is dep for d in collected.same_partition_inputs):
            collected.same_partition_inputs.append(dep)
        value = f"DEP[{index}]" + (f"@{obj.partition}" if obj.partition is not None else "")
        value += f"/{obj.name}" if obj.name else ""
        if obj.all_partitions:
            value += "/*"
        collected.config_version[prefix] = value
        return
    if isinstance(obj, VersionedValue):
        collected.config_version[prefix] = obj.value
        return
    if isinstance(obj, (OutputName, PartitionKeyName)):
        return
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _walk_config(getattr(obj, f.name), child_prefix + f.name, collected, output_prefix, resolve)
    elif isinstance(obj, (list, tuple)):
        # Marin walks lists only; tuples are walked the same way (its newer releases do too), which
        # changes nothing for tuples without versioned values or references.
        for i, item in enumerate(obj):
            _walk_config(item, f"{child_prefix}[{i}]", collected, output_prefix, resolve)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            if not isinstance(key, str):
                raise ValueError(f"dict keys in a step config must be str, got {key!r} ({type(key).__name__})")
            _walk_config(item, child_prefix + key, collected, output_prefix, resolve)


@dataclass(eq=False)  # compared by identity: one node per distinct version
class ResolvedStep:
    """A step with its version, hash and output path computed for one prefix."""

    step: ExecutorStep
    version: dict[str, Any]
    hash: str
    output_path: str
    dependencies: list[ResolvedStep]
    pseudo_dependencies: list[ResolvedStep]
    all_partition_inputs: list[ResolvedStep]
    specific_partition_inputs: list[tuple[ResolvedStep, str]] = field(default_factory=list)
    same_partition_inputs: list[ResolvedStep] = field(default_factory=list)
    asset_name: str = ""
    """The name this step shows under (e.g. as a Dagster asset): its name, or ``<name>-<hash>`` when
    several versions of one name are in the graph (a sweep). Set by :class:`StepGraph`."""

    def partitions_needed(self, dep: ResolvedStep, partition: str | None, graph: StepGraph) -> list[str | None]:
        """Which partitions of ``dep`` this step needs when it runs for ``partition``."""
        if dep.partitioned_by is None:
            return [None]
        keys: list[str | None] = []
        if any(d is dep for d in self.all_partition_inputs):
            keys.extend(graph.partition_keys(dep.partitioned_by))
        keys.extend(k for d, k in self.specific_partition_inputs if d is dep and k not in keys)
        if any(d is dep for d in self.same_partition_inputs) and partition not in keys:
            keys.append(partition)
        return keys

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def partitioned_by(self) -> str | None:
        return self.step.partitioned_by

    def partition_output_path(self, partition: str | None) -> str:
        """Where this step writes for ``partition`` (its output path when unpartitioned)."""
        if self.partitioned_by is None:
            if partition is not None:
                raise ValueError(f"step {self.name} is not partitioned, got partition {partition!r}")
            return self.output_path
        if partition is None:
            raise ValueError(f"step {self.name} is partitioned by {self.partitioned_by!r}: a partition key is required")
        return join_path(self.output_path, validate_partition_key(partition))


class StepGraph:
    """All steps reachable from a list of steps, with versions and output paths.

    Steps whose versions are identical are merged: the first one seen is canonical and every
    dependency on a duplicate points at it, so it runs once. As in Marin, a merge is logged as a
    warning (once per step name), so steps meant to differ that hash alike are noticed.
    """

    def __init__(
        self,
        steps: Iterable[ExecutorStep | InputName],
        prefix: str,
        partitions: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if prefix.startswith(("file://", "local://")):  # the local folder it names, spelled one way
            prefix = local_prefix(prefix)
        self.prefix = prefix.rstrip("/") if prefix not in ("/",) else prefix
        self.partitions = {k: sorted(validate_partition_key(p) for p in v) for k, v in (partitions or {}).items()}
        self._by_step: dict[ExecutorStep, ResolvedStep] = {}
        self._by_version: dict[str, ResolvedStep] = {}
        self._definitions: dict[int, ExecutorStep] | None = None  # id(node) -> definition_of(node)
        # The canonical JSON of each node's version while resolving: a dependent's text embeds its
        # dependencies' texts as they are instead of encoding the whole nested ancestry again.
        self._texts: dict[int, str] = {}
        self._warned_same_version: set[str] = set()
        self.roots: list[ResolvedStep] = []
        root_ids: set[int] = set()
        for step in steps:
            if isinstance(step, InputName):  # Marin: an InputName in the list means its step
                if step.step is None:
                    continue
                step = step.step
            resolved = self._resolve(step, stack=())
            if id(resolved) not in root_ids:
                root_ids.add(id(resolved))
                self.roots.append(resolved)
        self._texts.clear()
        versions_per_name = collections.Counter(node.name for node in self._by_version.values())
        for node in self._by_version.values():
            node.asset_name = node.name if versions_per_name[node.name] == 1 else f"{node.name}-{node.hash}"

    def partition_keys(self, partition_set: str) -> list[str]:
        """The known keys of ``partition_set`` (sorted)."""
        return list(self.partitions.get(partition_set, []))

    def _resolve(self, step: ExecutorStep, stack: tuple[ExecutorStep, ...]) -> ResolvedStep:
        if step in self._by_step:
            return self._by_step[step]
        if step in stack:
            cycle = " -> ".join(s.name for s in (*stack, step))
            raise ValueError(f"dependency cycle: {cycle}")
        collected = _Collected()
        _walk_config(step.config, "", collected, self.prefix, lambda dep: self._resolve(dep, (*stack, step)))
        deps, pseudo, all_parts = collected.dependencies, collected.pseudo_dependencies, collected.all_partition_inputs
        config = canonical_version(collected.config_version)
        version: dict[str, Any] = {
            "name": step.name,
            "config": config,
            "dependencies": [d.version for d in collected.dependency_refs],
        }
        # version_json(version), composed: sorted keys, each dependency's text as already encoded.
        texts = {
            "config": version_json(config),
            "dependencies": "[" + ", ".join(self._texts[id(d)] for d in collected.dependency_refs) + "]",
            "name": json.dumps(step.name),
        }
        if collected.pseudo_dependency_refs:
            version["pseudo_dependencies"] = [d.version for d in collected.pseudo_dependency_refs]
            texts["pseudo_dependencies"] = (
                "[" + ", ".join(self._texts[id(d)] for d in collected.pseudo_dependency_refs) + "]"
            )
        if all_parts:
            consumed: dict[str, list[str]] = {}
            for dep in all_parts:
                if dep.partitioned_by is None:
                    raise ValueError(f"step {step.name} reads all partitions of {dep.name}, which is not partitioned")
                consumed[f"{dep.name}-{dep.hash}"] = self.partition_keys(dep.partitioned_by)
            version["consumed_partitions"] = canonical_version(consumed)
            texts["consumed_partitions"] = version_json(version["consumed_partitions"])
        key = "{" + ", ".join(f'"{k}": {texts[k]}' for k in sorted(texts)) + "}"
        if key in self._by_version:
            # Identical version (same name, config and dependencies): merge into the first one,
            # and say so as Marin does (a second step that was meant to differ silently runs once).
            merged = self._by_version[key]
            if step.name not in self._warned_same_version:
                self._warned_same_version.add(step.name)
                logger.warning(
                    "Multiple `ExecutorStep`s (named %s) have the same version; try to instantiate only once.",
                    step.name,
                )
            self._by_step[step] = merged
            return merged
        digest = _hash_text(key)
        if step.override_output_path:
            override = step.override_output_path
            output_path = (
                override if "://" in override or override.startswith("/") else join_path(self.prefix, override)
            )
        else:
            output_path = join_path(self.prefix, f"{step.name}-{digest}")
        resolved = ResolvedStep(
            step,
            version,
            digest,
            output_path,
            deps,
            pseudo,
            all_parts,
            collected.specific_partition_inputs,
            collected.same_partition_inputs,
        )
        self._by_step[step] = resolved
        self._by_version[key] = resolved
        self._texts[id(resolved)] = key
        return resolved

    def step_objects(self) -> list[ExecutorStep]:
        """Every step object seen, merged duplicates included (each maps to its canonical node)."""
        return list(self._by_step)

    def resolved(self, step: ExecutorStep) -> ResolvedStep:
        """The resolved (possibly merged) form of ``step``."""
        return self._by_step[step]

    def definition_of(self, node: ResolvedStep) -> ExecutorStep:
        """Of the step objects merged into ``node``, the one built first (see ``ExecutorStep.defined_in``).

        A sweep that reuses a training script's model re-creates an identical step after importing
        the original: the original, built first, is the definition.
        """
        if self._definitions is None:
            self._definitions = {}
            for step, resolved in self._by_step.items():
                best = self._definitions.get(id(resolved))
                if best is None or step.definition_order < best.definition_order:
                    self._definitions[id(resolved)] = step
        return self._definitions.get(id(node), node.step)

    def topological(self) -> list[ResolvedStep]:
        """Every distinct step, dependencies before dependents, in a stable order."""
        order: list[ResolvedStep] = []
        seen: set[int] = set()

        def visit(node: ResolvedStep) -> None:
            if id(node) in seen:
                return
            seen.add(id(node))
            for dep in (*node.dependencies, *node.pseudo_dependencies):
                visit(dep)
            order.append(node)

        for root in self.roots:
            visit(root)
        return order


def instantiate_config(
    config: Any, node: ResolvedStep, partition: str | None, graph: StepGraph, output_path: str | None = None
) -> Any:
    """Replace every placeholder in ``config`` by a concrete value for ``node`` (and ``partition``).

    ``output_path`` is where this step's own output placeholders point (the runner passes the
    attempt's staging folder); by default the unit's output path.
    """

    def input_path(inp: InputName) -> Any:
        if inp.step is None:
            name = inp.name or ""
            if "://" in name or name.startswith("/"):
                return name
            return join_path(graph.prefix, name)
        dep = graph.resolved(inp.step)
        if inp.all_partitions:
            if dep.partitioned_by is None:
                raise ValueError(f"{node.name}: .partitions() used on unpartitioned step {dep.name}")
            return [
                join_path(dep.partition_output_path(key), inp.name) for key in graph.partition_keys(dep.partitioned_by)
            ]
        if dep.partitioned_by is None:
            return join_path(dep.output_path, inp.name)
        if inp.partition is not None:
            return join_path(dep.partition_output_path(inp.partition), inp.name)
        if dep.partitioned_by != node.partitioned_by:
            raise ValueError(
                f"step {node.name} reads partitioned step {dep.name} (partitioned by "
                f"{dep.partitioned_by!r}) but is not partitioned the same way; use .partitions()"
            )
        return join_path(dep.partition_output_path(partition), inp.name)

    def walk(obj: Any) -> Any:
        if isinstance(obj, ExecutorStep):
            return input_path(InputName(step=obj))
        if isinstance(obj, InputName):
            return input_path(obj)
        if isinstance(obj, OutputName):
            own = output_path if output_path is not None else node.partition_output_path(partition)
            return join_path(own, obj.name)
        if isinstance(obj, PartitionKeyName):
            if partition is None:
                raise ValueError(f"step {node.name} uses this_partition() but runs without a partition")
            return partition
        if isinstance(obj, VersionedValue):
            return walk(obj.value)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            updates = {f.name: walk(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
            return dataclasses.replace(obj, **updates)
        if isinstance(obj, list):
            return [walk(x) for x in obj]
        if isinstance(obj, tuple):
            return tuple(walk(x) for x in obj)
        if isinstance(obj, dict):
            return {k: walk(v) for k, v in obj.items()}
        return obj

    return walk(config)
