"""The floors of the house, read from the imports (static: every ``import`` in a module, lazy ones
included): the engine imports no other part of ``marin_assets``; the landing zone sits on the engine
only; Dagster is imported by the bridge alone; the experiments (demo corpus included) are imported
only by experiments and the bridge."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "marin_assets"


def _imports() -> dict[str, set[str]]:
    """Module -> every absolute module name it imports (at any depth of its code)."""
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[module] = names
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "marin_assets" and len(parts) > 1 else parts[0]


IMPORTS = _imports()


def _arrows(from_room: str) -> list[tuple[str, str]]:
    return [(m, t) for m, targets in IMPORTS.items() if _room(m) == from_room for t in sorted(targets)]


def test_the_engine_imports_nothing_above_it():
    above = [(m, t) for m, t in _arrows("execution") if t.startswith("marin_assets.") and _room(t) != "execution"]
    assert not above, above


def test_the_landing_zone_sits_on_the_engine_only():
    landing = [m for m in IMPORTS if _room(m) == "landing"]
    assert set(landing) >= {"marin_assets.landing", "marin_assets.landing.zone"}
    above = [(m, t) for m, t in _arrows("landing") if t.startswith("marin_assets.") and _room(t) != "execution"]
    dagster = [(m, t) for m, t in _arrows("landing") if t.split(".")[0] in ("dagster", "dagster_ray")]
    assert not above and not dagster, above + dagster


@pytest.mark.parametrize("package", ["dagster", "dagster_ray"])
def test_dagster_is_imported_by_the_bridge_alone(package):
    outside = [
        (m, t)
        for m, targets in IMPORTS.items()
        for t in targets
        if t.split(".")[0] == package and _room(m) != "dagster_bridge" and m != "marin_assets.definitions"
    ]
    assert not outside, outside


def test_experiments_are_imported_by_experiments_and_the_bridge_only():
    allowed = {"experiments", "dagster_bridge", "definitions"}
    below = [
        (m, t)
        for m, targets in IMPORTS.items()
        for t in targets
        if t.startswith("marin_assets.experiments") and _room(m) not in allowed
    ]
    assert not below, below


def test_nothing_in_the_package_imports_the_experiment_facade():
    users = [m for m, targets in IMPORTS.items() if "marin_assets.execution.experiment" in targets]
    assert not users, users
