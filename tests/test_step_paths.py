"""Every path field of a step config is typed ``StepPath`` (a string, or a placeholder resolved to one):
the annotation says what the engine accepts there (``output_path_of(step)``, ``this_output_path()``).

Read from the source: the dataclasses of ``marin_assets`` named ``*Config`` / ``*Spec`` (step configs
and their parts), fields named ``*_path``, ``*_paths``, ``*_dir`` or ``*_dirs``. The command line's
own options (``ExecutorMainConfig``) are no step config.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "marin_assets"
NOT_STEP_CONFIGS = {"ExecutorMainConfig"}
PATH_SUFFIXES = ("_path", "_paths", "_dir", "_dirs")


def _path_fields() -> list[tuple[str, str, str]]:
    """(file:line, Class.field, its annotation) of every path field of a step config."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or not node.name.endswith(("Config", "Spec")):
                continue
            if node.name in NOT_STEP_CONFIGS:
                continue
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = item.target.id
                    if ast.unparse(item.annotation) == "bool":  # a switch about a path (append_sha_to_path)
                        continue
                    if name.endswith(PATH_SUFFIXES) or name in ("output_path", "input_path"):
                        where = f"{path.relative_to(ROOT.parent)}:{item.lineno}"
                        found.append((where, f"{node.name}.{name}", ast.unparse(item.annotation)))
    return found


def test_every_path_field_of_a_step_config_is_a_step_path():
    fields = _path_fields()
    assert len(fields) > 40  # the scan sees the stages' configs
    not_step_paths = [
        f"{where} {name}: {annotation}" for where, name, annotation in fields if "StepPath" not in annotation
    ]
    assert not not_step_paths, not_step_paths
