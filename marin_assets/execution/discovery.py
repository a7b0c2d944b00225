"""Where experiments come from: finding the team's experiment scripts (no Dagster import).

An experiment script is a plain Python module that builds :class:`ExecutorStep` objects (and calls
``executor_main`` in its main block). The code location finds the scripts through the project's
``pyproject.toml``::

    [tool.marin]
    experiments = ["marin_assets.experiments.hello_world", "experiments/*.py"]

Each entry is a module (``pkg.mod``), a package (every module in it) or a path glob relative to the
project (``experiments/*.py``, ``experiments/`` for every ``.py`` in a folder, ``**`` recursive).
``$MARIN_EXPERIMENTS`` (``os.pathsep``-separated, same entries) replaces the list, so a deployment
points at its own experiments repository.

Each script is imported as a module -- never as ``__main__``: its main block may delete outputs or
launch jobs -- and becomes one :class:`Experiment` named after it. What it contributes:

* exactly ``EXPERIMENT`` when the module defines one (an :class:`Experiment`, steps, or a list of
  steps) -- e.g. to add checks, schedules or partition sources;
* otherwise every step in the module's globals and in lists, tuples and dicts of them (an
  ``InputName`` counts as its step).

A module with no step that has a ``__main__`` block calling ``executor_main`` is reported as an error
with a hint (its steps exist only while it runs as a script); a module with neither (a helper such
as ``defaults.py`` inside a listed package) is not an experiment and is skipped. A script that fails
to import is reported with its traceback; the others still load.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib
import importlib.util
import logging
import os
import pkgutil
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from marin_assets.execution.declarations import Experiment
from marin_assets.execution.step import ExecutorStep
from marin_assets.execution.step_walk import root_steps, steps_in

logger = logging.getLogger("marin.experiments")

ENV_VAR = "MARIN_EXPERIMENTS"
DECLARATION = "EXPERIMENT"
MAIN_ONLY_HINT = (
    "no step at module level: its steps exist only inside `if __name__ == '__main__':`, which the code "
    "location never runs. Build the steps at module level (e.g. `STEPS = [...]`, or `EXPERIMENT = "
    "Experiment(steps=[...])`) and keep only `executor_main(...)` in the main block."
)


@dataclass
class Script:
    """One discovered experiment script: its experiment, or why it has none."""

    name: str
    """Group name: the module's last component (a file's stem), made a valid name."""
    module: str
    path: str | None
    experiment: Experiment | None = None
    error: str | None = None
    """Traceback or hint when the script failed to import or declares no step."""
    imports: frozenset[str] = frozenset()
    """Modules the script's globals come from (to list a script before the scripts building on it)."""


FALLBACK_ROOT: str | None = None
"""Where the code location's entry file lives (``definitions.py`` sets it): the project when the
working directory is elsewhere (a code server started from ``/``, an installed package)."""


def project_root() -> str:
    """The folder of the project's ``pyproject.toml``: ``$MARIN_PROJECT_ROOT``, else the nearest
    ``pyproject.toml`` with a ``[tool.marin]`` table at or above the working directory, else
    :data:`FALLBACK_ROOT`, else this package's repository."""
    if os.environ.get("MARIN_PROJECT_ROOT"):
        return os.path.abspath(os.environ["MARIN_PROJECT_ROOT"])
    here = os.path.abspath(os.getcwd())
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate) and "[tool.marin]" in _read(candidate):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    if FALLBACK_ROOT is not None:
        return FALLBACK_ROOT
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:  # a local project file, never a remote path
            return handle.read()
    except OSError:
        return ""


def experiment_entries(root: str | None = None) -> list[str]:
    """Where scripts live: ``$MARIN_EXPERIMENTS`` if set, else ``[tool.marin] experiments``."""
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return [e.strip() for e in env.split(os.pathsep) if e.strip()]
    import tomllib

    path = os.path.join(root or project_root(), "pyproject.toml")
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        return []
    entries = data.get("tool", {}).get("marin", {}).get("experiments", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ValueError(f"{path}: [tool.marin] experiments must be a list of strings, got {entries!r}")
    return entries


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _is_path_entry(entry: str) -> bool:
    return "/" in entry or os.sep in entry or entry.endswith(".py") or any(c in entry for c in "*?[")


def _files_of(entry: str, root: str) -> list[str]:
    pattern = entry if os.path.isabs(entry) else os.path.join(root, entry)
    if os.path.isdir(pattern):
        pattern = os.path.join(pattern, "*.py")
    files = sorted(glob.glob(pattern, recursive=True))
    return [f for f in files if f.endswith(".py") and not os.path.basename(f).startswith(("_", "."))]


def _module_name_for_file(path: str, root: str) -> str | None:
    """``experiments.exp1`` for ``<root>/experiments/exp1.py`` when that is importable as such."""
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return None
    dotted = rel[: -len(".py")].replace(os.sep, ".")
    return dotted if _MODULE_NAME.match(dotted) else None


def _group_name(module: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", module.rsplit(".", 1)[-1])
    return name if name and not name[0].isdigit() else f"exp_{name}"


def _import_file(path: str, root: str) -> Any:
    dotted = _module_name_for_file(path, root)
    if dotted is not None:
        if root not in sys.path:
            sys.path.insert(0, root)  # as `python -m experiments.exp1` from the project would see it
        return importlib.import_module(dotted)
    name = f"marin_experiments.{_group_name(os.path.splitext(os.path.basename(path))[0])}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    try:  # not importable by name elsewhere (Ray workers): its functions travel by value
        import cloudpickle

        cloudpickle.register_pickle_by_value(module)
    except Exception as exc:  # noqa: BLE001 - only steps sent to Ray need it; say so now, not on the worker
        logger.warning(
            "%s: its functions cannot travel to Ray workers by value (%s: %s); a step of it sent to Ray "
            "will fail to unpickle there unless the module is importable on the worker",
            path,
            type(exc).__name__,
            exc,
        )
    return module


def _has_main_block(module: Any) -> bool:
    path = getattr(module, "__file__", None)
    source = _read(path) if path else ""
    return bool(re.search(r"""^if\s+__name__\s*==\s*['"]__main__['"]\s*:""", source, re.M)) and (
        "executor_main" in source
    )


def experiment_of_module(module: Any, name: str) -> Experiment | None:
    """The experiment a module declares (``EXPERIMENT``) or holds (its module-level steps); None if none."""
    declared = getattr(module, DECLARATION, None)
    description = (module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else None
    if declared is not None:
        if isinstance(declared, Experiment):
            return dataclasses.replace(declared, name=name, description=declared.description or description)
        steps = steps_in(declared)
        if not steps:
            raise TypeError(f"{module.__name__}.{DECLARATION} must be an Experiment or steps, got {declared!r:.200}")
        return Experiment(name=name, steps=steps, description=description)
    collected: dict[int, ExecutorStep] = {}
    for attr, value in vars(module).items():
        if attr.startswith("__"):
            continue
        for step in steps_in(value):
            collected.setdefault(id(step), step)
    if not collected:
        return None
    return Experiment(name=name, steps=root_steps(list(collected.values())), description=description, job=False)


def _load(name: str, module_name: str, path: str | None, importer: Callable[[], Any]) -> Script | None:
    try:
        module = importer()
        experiment = experiment_of_module(module, name)
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a script too: the others must load
        if isinstance(exc, KeyboardInterrupt):
            raise
        error = traceback.format_exc()
        logger.error("experiment script %s failed to load:\n%s", path or module_name, error)
        return Script(name, module_name, path, error=error)
    if experiment is None:
        if _has_main_block(module):
            return Script(name, module_name, getattr(module, "__file__", path), error=MAIN_ONLY_HINT)
        return None
    where = getattr(module, "__file__", path)
    return Script(name, module.__name__, where, experiment=experiment, imports=_imports(module))


def _imports(module: Any) -> frozenset[str]:
    found = set()
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, type(sys)) else getattr(value, "__module__", None)
        if isinstance(name, str) and name != module.__name__:
            found.add(name)
    return frozenset(found)


def _builders_last(scripts: list[Script]) -> list[Script]:
    """Scripts in list order, except that a script comes after the listed scripts it imports from
    (a sweep after the training script it varies): a step they share is then shown in the group
    of the script that defines it."""
    by_module = {s.module: s for s in scripts}
    ordered: list[Script] = []
    state: dict[int, int] = {}

    def visit(script: Script) -> None:
        if state.get(id(script)):
            return  # done, or being visited (an import cycle keeps list order)
        state[id(script)] = 1
        for name in sorted(script.imports):
            if name in by_module:
                visit(by_module[name])
        ordered.append(script)
        state[id(script)] = 2

    for script in scripts:
        visit(script)
    return ordered


def discover(entries: Sequence[str] | None = None, root: str | None = None) -> list[Script]:
    """The experiment scripts ``entries`` name (default :func:`experiment_entries`), in order, once each."""
    root = root or project_root()
    entries = experiment_entries(root) if entries is None else entries
    scripts: list[Script] = []
    seen_modules: set[str] = set()
    names: set[str] = set()

    def add(script: Script | None) -> None:
        if script is None:
            return
        if script.name in names:  # two scripts of one name in different folders
            base = script.name
            i = 2
            while f"{base}_{i}" in names:
                i += 1
            script.name = f"{base}_{i}"
            if script.experiment is not None:
                script.experiment = dataclasses.replace(script.experiment, name=script.name)
        names.add(script.name)
        scripts.append(script)

    for entry in entries:
        if _is_path_entry(entry):
            files = _files_of(entry, root)
            if not files:
                logger.warning("experiments entry %r matches no .py file under %s", entry, root)
            for path in files:
                key = os.path.realpath(path)
                if key in seen_modules:
                    continue
                seen_modules.add(key)
                stem = os.path.splitext(os.path.basename(path))[0]
                add(_load(_group_name(stem), stem, path, lambda p=path: _import_file(p, root)))
            continue
        if not _MODULE_NAME.match(entry):
            add(
                Script(
                    _group_name(entry), entry, None, error=f"experiments entry {entry!r} is neither a module nor a path"
                )
            )
            continue
        try:
            package = importlib.import_module(entry)
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, KeyboardInterrupt):
                raise
            add(Script(_group_name(entry), entry, None, error=traceback.format_exc()))
            continue
        modules = [entry]
        if hasattr(package, "__path__"):  # a package: each of its (non-private) modules
            modules = [
                f"{entry}.{info.name}"
                for info in pkgutil.iter_modules(package.__path__)
                if not info.name.startswith("_") and not info.ispkg
            ]
        for module_name in modules:
            if module_name in seen_modules:
                continue
            seen_modules.add(module_name)
            add(_load(_group_name(module_name), module_name, None, lambda m=module_name: importlib.import_module(m)))
    return _builders_last(scripts)


def discovered_experiments() -> list[Experiment]:
    """The experiments of every script that loaded (see :func:`discover`)."""
    return [s.experiment for s in discover() if s.experiment is not None]


def script_of_file(path: str, scripts: Sequence[Script]) -> Script | None:
    """The discovered script whose file is ``path`` (None when the location does not list it)."""
    real = os.path.realpath(path)
    for script in scripts:
        if script.path and os.path.realpath(script.path) == real:
            return script
    return None
