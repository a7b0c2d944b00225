"""Walking the steps an experiment's configs refer to (no Dagster import, no I/O).

A step depends on the steps its config holds (``output_path_of(step)``, ``InputName``, a step
itself), in dataclass fields, lists, tuples and dicts. These walks find them without resolving
versions -- for declarations (which partition sets the steps use) and for script discovery
(which module globals hold steps).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from marin_assets.execution.step import ExecutorStep, InputName


def _references(obj: Any, out: list[ExecutorStep], depth: int = 0) -> None:
    """Append every step ``obj`` (a config) refers to."""
    if obj is None or depth > 32:
        return
    if isinstance(obj, ExecutorStep):
        out.append(obj)
    elif isinstance(obj, InputName):
        if obj.step is not None:
            out.append(obj.step)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            _references(getattr(obj, f.name), out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _references(item, out, depth + 1)
    elif isinstance(obj, dict):
        for item in obj.values():
            _references(item, out, depth + 1)


def direct_dependencies(step: ExecutorStep) -> list[ExecutorStep]:
    """The steps ``step``'s config refers to."""
    out: list[ExecutorStep] = []
    _references(step.config, out)
    return out


def walk_steps(steps: Sequence[ExecutorStep]) -> list[ExecutorStep]:
    """``steps`` and every step they depend on (each object once)."""
    seen: dict[int, ExecutorStep] = {}
    stack = list(steps)
    while stack:
        step = stack.pop()
        if id(step) in seen:
            continue
        seen[id(step)] = step
        stack.extend(direct_dependencies(step))
    return list(seen.values())


def root_steps(steps: Sequence[ExecutorStep]) -> list[ExecutorStep]:
    """The steps of ``steps`` that no other of them depends on (order kept)."""
    referenced = {id(dep) for step in steps for dep in direct_dependencies(step)}
    return [s for s in steps if id(s) not in referenced]


def steps_in(value: Any, depth: int = 0) -> list[ExecutorStep]:
    """Steps held by a module global: a step, an ``InputName``, or lists/tuples/dicts of them."""
    if isinstance(value, ExecutorStep):
        return [value]
    if isinstance(value, InputName):
        return [value.step] if value.step is not None else []
    if depth < 3 and isinstance(value, (list, tuple)):
        return [s for item in value for s in steps_in(item, depth + 1)]
    if depth < 3 and isinstance(value, dict):
        return [s for item in value.values() for s in steps_in(item, depth + 1)]
    return []
