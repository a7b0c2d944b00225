"""The ``pip_dependency_groups`` an experiment's steps declare (for the job's runtime env).

``python -m marin_assets.run.step_groups <script.py | -m module>`` imports the experiment *without*
running its ``__main__`` block, collects every :class:`ExecutorStep` reachable from its module
globals (directly, in lists/tuples/dicts, and through the steps' config dependencies) and prints
their groups as a JSON list. ``ray_run`` calls it in a child process, so the experiment's imports
never load into the launcher.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import runpy
import sys
from collections.abc import Iterable
from typing import Any

from marin_assets.execution.step import ExecutorStep, InputName


def _steps_in(value: Any, depth: int = 0) -> Iterable[ExecutorStep]:
    if isinstance(value, ExecutorStep):
        yield value
    elif depth < 2 and isinstance(value, list | tuple | set):
        for item in value:
            yield from _steps_in(item, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for item in value.values():
            yield from _steps_in(item, depth + 1)


def _config_dependencies(value: Any) -> Iterable[ExecutorStep]:
    if isinstance(value, InputName):
        if value.step is not None:
            yield value.step
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _config_dependencies(getattr(value, f.name))
    elif isinstance(value, list | tuple | set):
        for item in value:
            yield from _config_dependencies(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _config_dependencies(item)


def dependency_groups(namespace: dict[str, Any]) -> list[str]:
    """Groups of every step in ``namespace`` and of the steps they depend on (first-seen order)."""
    seen: set[int] = set()
    todo = [s for value in namespace.values() for s in _steps_in(value)]
    groups: list[str] = []
    while todo:
        step = todo.pop()
        if id(step) in seen:
            continue
        seen.add(id(step))
        for group in step.pip_dependency_groups or []:
            if group not in groups:
                groups.append(group)
        todo.extend(_config_dependencies(step.config))
    return groups


def load_namespace(target: list[str]) -> dict[str, Any]:
    """Module globals of ``script.py`` or ``-m module`` (its ``__main__`` block does not run)."""
    if target[0] == "-m":
        return vars(importlib.import_module(target[1]))
    return runpy.run_path(target[0], run_name="__marin_step_groups__")


def main(argv: list[str] | None = None) -> None:
    """Print the groups of an experiment as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if not args or (args[0] == "-m" and len(args) < 2):
        raise SystemExit("usage: python -m marin_assets.run.step_groups <script.py | -m module>")
    sys.path.insert(0, ".")
    print(json.dumps(dependency_groups(load_namespace(args))))


if __name__ == "__main__":
    main()
