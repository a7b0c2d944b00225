"""Run observers of ``executor_main``: callables told about each finished command-line run.

The engine knows no observer by name. A layer above it registers its observer when it is
imported (the Dagster bridge's ``recording`` module registers the callable that records the run
in the Dagster instance), and ``executor_main`` imports the *observer plugins* -- modules that
register themselves -- before calling every registered observer, in registration order:

* ``$MARIN_RUN_OBSERVERS`` when set: comma-separated plugin modules (``package.module``) or
  single callables (``package.module:callable``); an empty value loads none;
* else the plugins the installed package declares under the entry-point group
  ``marin.run_observers`` (``pyproject.toml`` ``[project.entry-points."marin.run_observers"]``),
  read from that ``pyproject.toml`` when the code runs from a source checkout whose installed
  metadata predates the declaration.

An observer is called as ``observer(graph=..., run_id=..., run_only=..., description=..., caller=...,
report=...)`` after the last unit (``report``: the :class:`~marin_assets.execution.runner.ExecutionReport`
with every unit's outcome and seconds, also when steps failed); it accepts further keywords (``**_``)
so new ones can be added.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
from collections.abc import Callable
from typing import Any

ENV_VAR = "MARIN_RUN_OBSERVERS"
ENTRY_POINT_GROUP = "marin.run_observers"

RunObserver = Callable[..., Any]

_LOCK = threading.Lock()
_REGISTERED: dict[str, RunObserver] = {}


def register_run_observer(name: str, observer: RunObserver, *, first: bool = False) -> None:
    """Register ``observer`` under ``name`` (registering a name again replaces its observer).

    ``first`` puts it before the observers already registered (e.g. work that must start as soon
    as the steps are done, before a slower observer).
    """
    with _LOCK:
        _REGISTERED.pop(name, None)
        if first:
            items = [(name, observer), *_REGISTERED.items()]
            _REGISTERED.clear()
            _REGISTERED.update(items)
        else:
            _REGISTERED[name] = observer


def unregister_run_observer(name: str) -> None:
    """Forget the observer registered under ``name`` (no error when there is none)."""
    with _LOCK:
        _REGISTERED.pop(name, None)


def registered_run_observers() -> dict[str, RunObserver]:
    """The registered observers by name, in the order they are called."""
    with _LOCK:
        return dict(_REGISTERED)


def _source_declared_plugins() -> list[str]:
    """The group's modules in this package's own ``pyproject.toml`` (a source checkout), if any."""
    import tomllib

    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(os.path.dirname(here)), "pyproject.toml")
    try:
        with open(path, "rb") as handle:  # a file of this package's checkout, never a remote path
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return []
    group = data.get("project", {}).get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    return [str(value) for value in group.values()]


def declared_plugins() -> list[str]:
    """The observer plugins the package declares (entry points, else its source ``pyproject.toml``)."""
    entries = [ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]
    return entries or _source_declared_plugins()


def load_run_observers() -> list[RunObserver]:
    """Import the observer plugins (see the module docstring) and return every registered observer.

    Raises ImportError naming the plugin that cannot be imported (or lacks the named callable).
    """
    spec = os.environ.get(ENV_VAR)
    plugins = declared_plugins() if spec is None else [s.strip() for s in spec.split(",") if s.strip()]
    for item in plugins:
        module_name, _, attr = item.partition(":")
        try:
            module = importlib.import_module(module_name)
            if attr:
                register_run_observer(item, getattr(module, attr))
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"run observer {item} unavailable: {exc}") from exc
    return list(registered_run_observers().values())
