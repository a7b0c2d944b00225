"""Dedup's modules import downwards only: the config from ``dedup_config``, no circle, no lazy import."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "marin_assets.processing.classification"
FOLDER = Path(__file__).resolve().parents[2] / "marin_assets/processing/classification"
DEDUP = ("dedupe", "dedup_config", "dedup_text", "dedup_passes", "dedup_index", "decontaminate", "minhash")


def _imports(module: str) -> tuple[set[str], list[str]]:
    """(sibling modules imported at module level, sibling imports inside functions)."""
    tree = ast.parse((FOLDER / f"{module}.py").read_text())
    top, nested = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
            name = node.module.removeprefix(PACKAGE + ".")
            (top.add(name) if node in tree.body else nested.append(name))
    return top, nested


def test_dedup_modules_form_no_circle_and_import_nothing_lazily():
    graph = {}
    for module in DEDUP:
        top, nested = _imports(module)
        assert nested == [], f"{module} imports {nested} inside a function"
        graph[module] = top & set(DEDUP)
    assert "dedupe" not in set().union(*(graph[m] for m in DEDUP if m != "dedupe"))
    assert {"dedup_config"} <= graph["dedup_passes"] and {"dedup_config"} <= graph["decontaminate"]
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join((*path, module))}"
        if module not in done:
            for dep in graph[module]:
                visit(dep, (*path, module))
            done.add(module)

    for module in DEDUP:
        visit(module, ())
