"""Docs are code: every module, file and function that README.md and docs/*.md name exists.

Read from the text (inline code and code blocks): a file path (``execution/ray_launch.py``, also
shortened to its tail), ``path/module.py:name`` (a function, class or constant of that file, or
``Class.method``), and a dotted name whose head is one of our modules (``unit_run.reason_for``,
``marin_resources.ray_connect.steps_on_ray``, Marin's ``marin.execution.executor``): the module
must exist and define the rest; a private name of no module at all (``assets._make_compute``) is
a module that went. Other names whose head is no module of ours (``ray.init``, ``dg.materialize``,
``config.address``) are not ours to check.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PACKAGES = ("marin_assets", "marin_resources", "tests", "bench", "scripts", "k8s", "docs")
# Marin's names for our packages (marin_alias.py): the docs may use them.
ALIASES = (("fray.cluster.", "marin_resources."), ("marin.resources.", "marin_resources."), ("marin.", "marin_assets."))

# Words the docs use for values, not modules (``config.lr``, ``step.partitions``), file suffixes
# (``metadata.json``) and placeholders (``marin.X.Y``).
VARIABLES = frozenset({"config", "step", "train", "train_config", "metadata", "deploy", "experiments", "args", "self"})
SUFFIXES = frozenset({"json", "yaml", "yml", "pth", "npz", "log", "com", "txt", "gz", "zst", "jsonl", "parquet", "md"})
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.S)
FILE_REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|sh|md|yaml|toml|txt))(?::([A-Za-z_][\w.]*))?")
DOTTED = re.compile(r"(?<![\w./:-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/-])")


def _repo_files() -> list[str]:
    files = [
        p.relative_to(REPO).as_posix() for top in PACKAGES if (REPO / top).is_dir() for p in (REPO / top).rglob("*")
    ]
    files += [p.name for p in REPO.iterdir() if p.is_file()]
    return [f for f in files if "__pycache__" not in f and ".egg-info" not in f]


FILES = _repo_files()
FOLDERS = {part for f in FILES for part in f.split("/")[:-1]} - {"experiments"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for rel in FILES:
        if rel.endswith(".py"):
            parts = rel[: -len(".py")].split("/")
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = REPO / rel
    return found


MODULES = _modules()


@functools.cache
def _names(path: Path) -> dict[str, set[str]]:
    """Top-level names of a module (functions, classes, assignments, imports), each with the names
    in its body (a class's methods and attributes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: dict[str, set[str]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names[node.name] = set()
            elif isinstance(node, ast.ClassDef):
                inner: set[str] = set()
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        inner.add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        inner.add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        inner |= {t.id for t in item.targets if isinstance(t, ast.Name)}
                names[node.name] = inner
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update({n.id: set() for n in ast.walk(target) if isinstance(n, ast.Name)})
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update({(a.asname or a.name).split(".")[0]: set() for a in node.names})
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return names


def _defines(path: Path, dotted: str) -> bool:
    head, _, rest = dotted.partition(".")
    names = _names(path)
    if head not in names:
        return False
    return not rest or rest.split(".")[0] in names[head] or not names[head]


def _files_named(ref: str) -> list[str]:
    return [f for f in FILES if f == ref or f.endswith("/" + ref)]


def _modules_named(name: str) -> list[str]:
    """Our modules whose dotted name is ``name`` or ends with it (``unit_run``, ``execution.secrets``)."""
    for alias, target in ALIASES:
        if name.startswith(alias) or name + "." == alias:
            name = target + name[len(alias) :] if name.startswith(alias) else target.rstrip(".")
    return [m for m in MODULES if m == name or m.endswith("." + name)]


def check_dotted(name: str) -> str | None:
    """Why ``name`` does not resolve, or None (also when its head is no module of ours)."""
    parts = name.split(".")
    if parts[0] in VARIABLES or parts[-1] in SUFFIXES or any(len(p) == 1 and p.isupper() for p in parts):
        return None
    if parts[0] == "marin" and not _modules_named(".".join(parts[:2])):
        return None  # a logger or entry-point group named marin.* (``marin.progress``), not a module
    for cut in range(len(parts), 0, -1):  # the longest module prefix first
        modules = _modules_named(".".join(parts[:cut]))
        if not modules:
            continue
        rest = ".".join(parts[cut:])
        if not rest or any(_defines(MODULES[m], rest) for m in modules):
            return None
        return f"{'.'.join(parts[:cut])} ({', '.join(modules)}) defines no {rest}"
    if len(parts) == 2 and parts[1].startswith("_") and importlib.util.find_spec(parts[0]) is None:
        return f"no module {parts[0]} (for {parts[1]})"  # a private function of a module that is gone
    return None


def check_file(path: str, name: str | None) -> str | None:
    """Why ``path`` (and ``path:name``) does not resolve, or None."""
    matches = _files_named(path)
    if not matches:
        return f"no file {path}"
    if name and path.endswith(".py") and not any(_defines(REPO / m, name) for m in matches):
        return f"{path} defines no {name}"
    return None


def references(text: str) -> list[tuple[str, str | None, str]]:
    """(kind, a reference, its name or None) of every reference in the code of ``text``."""
    found = []
    for span in CODE.findall(text):
        for match in FILE_REF.finditer(span):
            found.append(("file", match.group(1), match.group(2)))
        stripped = FILE_REF.sub(" ", span)
        found += [("dotted", m.group(1), None) for m in DOTTED.finditer(stripped)]
    return found


def _broken(doc: Path) -> list[str]:
    broken = []
    for kind, ref, name in references(doc.read_text(encoding="utf-8")):
        # Only paths into this repository are ours: a folder of it first (``execution/x.py``,
        # ``docs/engine.md``), or a bare file name with a name in it (``runner.py:run_steps``); a
        # team's files (``experiments/exp1.py``, ``my_experiment.py``) are examples.
        if kind == "file" and ("/" in ref and ref.split("/")[0] not in FOLDERS or "/" not in ref and not name):
            continue
        why = check_file(ref, name) if kind == "file" else check_dotted(ref)
        if why:
            broken.append(f"{doc.name}: `{ref}{':' + name if name else ''}`: {why}")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_reference_in_the_docs_resolves(doc):
    broken = _broken(doc)
    assert not broken, "\n".join(broken)


def test_the_checker_finds_a_missing_function_and_a_moved_module():
    assert references("see `execution/runner.py:run_steps` and `unit_run.reason_for`") == [
        ("file", "execution/runner.py", "run_steps"),
        ("dotted", "unit_run.reason_for", None),
    ]
    assert check_file("execution/runner.py", "run_steps") is None
    assert check_file("execution/runner.py", "no_such_function") is not None
    assert check_dotted("unit_run.reason_for") is None
    assert check_dotted("unit_run.bring_inputs") is not None  # deleted (issue 39)
    assert check_file("marin_resources/ray_cluster.py", None) is not None  # the pass-through that went
    assert check_dotted("marin.execution.executor.ExecutorStep") is None  # Marin's name, through the alias
    assert check_dotted("assets._make_compute") is not None  # a module that is gone
    assert check_dotted("ray.init") is None  # not ours to check
