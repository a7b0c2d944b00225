"""Marin's module names for this project: ``marin.*``, ``fray.cluster`` and ``experiments.*``.

A Marin experiment script runs here as written (``python exp.py``, the code location, ``ray_run``)
because the interpreter resolves Marin's names through :class:`MarinAliasFinder`, which
``marin_alias.pth`` (shipped in the wheel and in editable installs, see ``setup.py``) installs at
interpreter start:

* ``marin`` -> ``marin_assets`` and ``marin.X.Y`` -> ``marin_assets.X.Y``; ``marin.resources``,
  ``fray.cluster`` and ``fray.v2`` -> ``marin_resources``. The alias *is* the module: ``marin.execution.executor
  is marin_assets.execution.executor``, so classes, ``isinstance`` checks, pickles and step hashes
  are the same under either name.
* ``src.marin.X`` (Marin's repository-root spelling) -> ``marin_assets.X``; the top-level
  ``train_test_overlap`` package -> ``marin_assets.train_test_overlap`` (``run_data_overlap``).
* ``experiments`` -> the team's own ``experiments`` package when there is one: on ``sys.path``
  (an installed or ``PYTHONPATH`` checkout), else an ``experiments/`` folder in the working
  directory, above the script being run, or at ``$MARIN_PROJECT_ROOT``. Its modules always win;
  a module it lacks (``experiments.llama`` in a repository that only keeps its own scripts) falls
  back to this project's built-in one (``marin_assets.experiments.llama``). Without a team
  package, ``experiments.X`` is ``marin_assets.experiments.X``. The built-ins keep their own
  name and never shadow a team module. A module neither has fails with one line naming the Marin file
  to copy into the team's ``experiments/``.

**Real Marin wins.** When a real ``marin`` (or ``fray``) package is importable, the finder steps
aside for it and everything under it: nothing here is aliased. ``MARIN_IMPORT_ALIAS=0`` turns the
finder off entirely (then the textual ``sed`` mapping of ``docs/engine.md`` still works).

This module imports nothing of the project at interpreter start (only the standard library); the
target modules are imported when a script first imports a Marin name.
"""

from __future__ import annotations

# Little beyond what the interpreter has loaded already: this module is imported at every interpreter
# start (``importlib.abc`` alone costs tens of milliseconds there, so the finder and loaders are plain
# classes with the protocol's methods).
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from collections.abc import Sequence

ENV_SWITCH = "MARIN_IMPORT_ALIAS"

# Longest prefix first: ``marin.resources`` before ``marin``.
PREFIXES: tuple[tuple[str, str], ...] = (
    ("src.marin.resources", "marin_resources"),  # Marin's repository-root spelling ``import src.marin...``
    ("src.marin", "marin_assets"),
    ("train_test_overlap", "marin_assets.train_test_overlap"),  # Marin's top-level overlap package
    ("fray.cluster", "marin_resources"),
    ("fray.v2", "marin_resources"),  # Marin's newer ``from fray.v2 import ResourceConfig``
    ("marin.resources", "marin_resources"),
    ("marin", "marin_assets"),
)
TEAM_PACKAGE = "experiments"
BUILTIN_EXPERIMENTS = "marin_assets.experiments"
MARIN_REPOSITORY = "https://github.com/marin-community/marin/blob/main"
_FRAY_MARKER = "__marin_alias_of__"


def _target_of(fullname: str) -> str | None:
    """``marin_assets.X`` for ``marin.X`` (the mapping by prefix); None for names it does not map."""
    for alias, target in PREFIXES:
        if fullname == alias or fullname.startswith(alias + "."):
            return target + fullname[len(alias) :]
    return None


def _real_package_exists(name: str) -> bool:
    """Whether a real top-level ``name`` (a module or a package with ``__init__.py``) is importable
    from ``sys.path`` (then it wins). A bare folder of that name (a namespace package, e.g. a Marin
    checkout called ``marin`` in the working directory) does not count."""
    spec = importlib.machinery.PathFinder.find_spec(name, sys.path)
    return spec is not None and spec.origin is not None


def _is_alias(name: str) -> bool:
    """Whether ``sys.modules[name]`` is one of ours under another name (``marin`` -> ``marin_assets``)."""
    module = sys.modules.get(name)
    if module is None:
        return False
    return getattr(module, _FRAY_MARKER, None) is not None or getattr(module, "__name__", name) != name


def team_roots() -> list[str]:
    """Folders that may hold the team's ``experiments/`` package, nearest first: the working
    directory, each folder above the script being run, ``$MARIN_PROJECT_ROOT``."""
    roots: list[str] = [os.getcwd()]
    script_dir = sys.path[0] if sys.path and sys.path[0] else ""
    if script_dir:
        here = os.path.abspath(script_dir)
        while True:
            roots.append(here)
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    if os.environ.get("MARIN_PROJECT_ROOT"):
        roots.append(os.environ["MARIN_PROJECT_ROOT"])
    seen: list[str] = []
    for root in roots:
        root = os.path.abspath(root)
        if root not in seen:
            seen.append(root)
    return seen


def _is_team_folder(folder: str) -> bool:
    """An ``experiments`` folder holding Python: an ``__init__.py`` or, as a namespace package, ``.py`` files."""
    try:
        return os.path.isdir(folder) and any(name.endswith(".py") for name in os.listdir(folder))
    except OSError:
        return False


def _team_package_spec() -> importlib.machinery.ModuleSpec | None:
    """The spec of the team's ``experiments`` folder, if any (nearest root first)."""
    for root in team_roots():
        if _is_team_folder(os.path.join(root, TEAM_PACKAGE)):
            return importlib.machinery.PathFinder.find_spec(TEAM_PACKAGE, [root])
    return None


class _AliasLoader:
    """Loads an alias as the target module itself (no second copy)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        self._spec = getattr(module, "__spec__", None)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system set the alias spec on the module: give the module its own back, so
        # ``module.__spec__.name`` (reloads, ``python -m``, Ray's pickling) stays the real name.
        if self._spec is not None:
            module.__spec__ = self._spec


class _FrayLoader:
    """``fray`` without Fray: an empty package whose ``cluster`` and ``v2`` are ``marin_resources``."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType("fray", "Marin's fray (not installed): fray.cluster is marin_resources here.")
        setattr(module, _FRAY_MARKER, "marin_resources")
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def _alias_spec(fullname: str, target: str) -> importlib.machinery.ModuleSpec:
    try:
        found = importlib.util.find_spec(target)
    except ModuleNotFoundError:
        found = None
    if found is None:
        raise ModuleNotFoundError(
            f"No module named {fullname!r}: Marin's names resolve to this project here, and {target!r} "
            "does not exist (docs/engine.md 'Running Marin experiment scripts' lists what is provided)",
            name=fullname,
        )
    is_package = found.submodule_search_locations is not None
    spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(target), is_package=is_package)
    if found.submodule_search_locations is not None:
        spec.submodule_search_locations = list(found.submodule_search_locations)
    return spec


def _exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _missing_experiment(fullname: str, team_dirs: list[str] | None) -> ModuleNotFoundError:
    """One line for an ``experiments.X`` that neither the team's package nor the built-ins have: the Marin
    file to copy, and where."""
    rel = fullname.replace(".", "/")
    where = f"nor in {team_dirs[0]}" if team_dirs else "no team experiments/ folder was found"
    return ModuleNotFoundError(
        f"No module named {fullname!r}: not built into this project ({where}) -- copy Marin's {rel}.py "
        f"({MARIN_REPOSITORY}/{rel}.py) into the team's experiments/ folder",
        name=fullname,
    )


class _EmptyPackageLoader:
    """An empty package (``src`` for Marin's ``src.marin`` spelling)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(self.name, f"Marin's repository root: {self.name}.marin is marin_assets here.")
        setattr(module, _FRAY_MARKER, "marin_assets")
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


class MarinAliasFinder:
    """Resolves Marin's module names to this project's (see the module docstring)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top, _, _ = fullname.partition(".")
        if top == TEAM_PACKAGE:
            return self._experiments_spec(fullname, path)
        if top == "src":
            return self._src_spec(fullname, path)
        if top == "train_test_overlap":
            if fullname == top and _real_package_exists(top):
                return None
            if fullname != top and not _is_alias(top):
                return None
            return _alias_spec(fullname, _target_of(fullname) or "")
        if top not in ("marin", "fray"):
            return None
        if fullname == top:
            if _real_package_exists(top):
                return None  # real Marin / Fray is installed: it wins
            if top == "fray":
                return importlib.machinery.ModuleSpec("fray", _FrayLoader(), is_package=True)
            return _alias_spec(fullname, "marin_assets")
        parent = fullname.rpartition(".")[0]
        if not _is_alias(parent):
            return None  # under real Marin / Fray
        mapped = _target_of(fullname)
        if mapped is None:  # fray.X other than fray.cluster
            return None
        return _alias_spec(fullname, mapped)

    def _src_spec(self, fullname: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
        """``src.marin.X`` (Marin's scripts run from its repository root) is ``marin_assets.X``; ``src``
        itself is an empty package unless a real one exists (then only a ``src.marin`` it lacks is aliased)."""
        if fullname == "src":
            if importlib.machinery.PathFinder.find_spec("src", sys.path) is not None:
                return None
            return importlib.machinery.ModuleSpec("src", _EmptyPackageLoader("src"), is_package=True)
        if fullname == "src.marin" or fullname.startswith("src.marin."):
            if fullname == "src.marin" and path and importlib.machinery.PathFinder.find_spec(fullname, path):
                return None  # a real src/marin (a Marin checkout on sys.path) wins
            if fullname != "src.marin" and not _is_alias("src.marin"):
                return None
            return _alias_spec(fullname, _target_of(fullname) or "")
        return None

    def _experiments_spec(self, fullname: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
        if fullname == TEAM_PACKAGE:
            if importlib.machinery.PathFinder.find_spec(TEAM_PACKAGE, sys.path) is not None:
                return None  # the team's package on sys.path (a namespace package too): the normal import finds it
            team = _team_package_spec()
            if team is not None:
                return team
            return _alias_spec(fullname, BUILTIN_EXPERIMENTS)
        parent, _, child = fullname.rpartition(".")
        parent_module = sys.modules.get(parent)
        if parent_module is None:
            return None
        real_parent = parent_module.__name__
        if real_parent != parent:  # an alias of a built-in package: its modules, by the same name
            if not _exists(f"{real_parent}.{child}"):
                raise _missing_experiment(fullname, None)
            return _alias_spec(fullname, f"{real_parent}.{child}")
        found = importlib.machinery.PathFinder.find_spec(fullname, path)
        if found is not None:
            return found  # the team's module wins
        builtin = BUILTIN_EXPERIMENTS + fullname[len(TEAM_PACKAGE) :]
        if _exists(builtin):
            return _alias_spec(fullname, builtin)
        raise _missing_experiment(fullname, list(path) if path else None)


_FINDER = MarinAliasFinder()


def install() -> bool:
    """Put the finder on ``sys.meta_path`` just before the path-based finder (idempotent).

    Returns whether it is installed (``MARIN_IMPORT_ALIAS=0`` keeps it off).
    """
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if any(isinstance(f, MarinAliasFinder) for f in sys.meta_path):
        return True
    position = next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder), len(sys.meta_path))
    sys.meta_path.insert(position, _FINDER)
    return True


def uninstall() -> None:
    """Take the finder off ``sys.meta_path`` (tests)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, MarinAliasFinder)]
