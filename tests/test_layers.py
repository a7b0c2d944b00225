"""The floors of the house, read from the imports (static: every ``import`` in a module, lazy ones
and type-only ones under ``if TYPE_CHECKING:`` included), in ``marin_assets`` and ``marin_resources``:
the resources never import ``marin_assets``; the engine imports no other part of ``marin_assets``; the landing zone sits on the engine
only; Dagster is imported by the bridge alone; the experiments (demo corpus included) are imported
only by experiments, the bridge and the ``marin`` command, which nothing imports; lm-eval task data
(``eval_data``) sits below both training and the evaluation step; no module reaches
itself through its imports, and no room (``marin_assets.<room>``) imports one that imports it back."""

from __future__ import annotations

import ast
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("marin_assets", "marin_resources")


def _modules() -> dict[str, pathlib.Path]:
    """Module name -> its file, for every module of both packages."""
    found: dict[str, pathlib.Path] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _import_nodes(source: str) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``source`` at any depth: in functions (lazy) and under
    ``if TYPE_CHECKING:`` (type-only: a circle there still ties the two modules together)."""
    return [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import | ast.ImportFrom)]


def _imports(modules: bool = False) -> dict[str, set[str]]:
    """Module -> every absolute module name it imports (at any depth of its code).

    With ``modules``, only modules of the package, as the import reaches them: ``from a.b import c``
    names ``a.b.c`` when that is a module, else ``a.b`` (and a name is cut back to its module).
    """
    found: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        names: set[str] = set()
        for node in _import_nodes(path.read_text(encoding="utf-8")):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not modules:
                    names.add(node.module)
                    continue
                names.update(
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                    for a in node.names
                )
        if modules:
            cut = set()
            for name in names:
                while name and name not in MODULES:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    cut.add(name)
            names = cut
        found[module] = names
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "marin_assets" and len(parts) > 1 else parts[0]


IMPORTS = _imports()


def _arrows(from_room: str) -> list[tuple[str, str]]:
    return [(m, t) for m, targets in IMPORTS.items() if _room(m) == from_room for t in sorted(targets)]


def test_type_only_and_lazy_imports_count():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\ndef f():\n    from c import d\n"
    assert {getattr(n, "module", None) or n.names[0].name for n in _import_nodes(source)} == {"typing", "a.b", "c"}


def test_the_resources_never_import_the_assets():
    up = [(m, t) for m, t in _arrows("marin_resources") if t.split(".")[0] == "marin_assets"]
    assert not up, up


def test_the_engine_imports_nothing_above_it():
    above = [(m, t) for m, t in _arrows("execution") if t.startswith("marin_assets.") and _room(t) != "execution"]
    assert not above, above


def test_the_landing_zone_sits_on_the_engine_only():
    landing = [m for m in IMPORTS if _room(m) == "landing"]
    assert set(landing) >= {"marin_assets.landing", "marin_assets.landing.zone"}
    above = [
        (m, t)
        for m, t in _arrows("landing")
        if t.startswith("marin_assets.") and _room(t) not in ("execution", "landing")
    ]
    dagster = [(m, t) for m, t in _arrows("landing") if t.split(".")[0] in ("dagster", "dagster_ray")]
    assert not above and not dagster, above + dagster


@pytest.mark.parametrize("package", ["dagster", "dagster_ray"])
def test_dagster_is_imported_by_the_bridge_alone(package):
    outside = [
        (m, t)
        for m, targets in IMPORTS.items()
        for t in targets
        if t.split(".")[0] == package
        and m.startswith("marin_assets.")
        and _room(m) != "dagster_bridge"
        and m != "marin_assets.definitions"
    ]
    assert not outside, outside


def test_experiments_are_imported_by_experiments_the_bridge_and_the_command_only():
    allowed = {"experiments", "dagster_bridge", "definitions", "cli"}
    below = [
        (m, t)
        for m, targets in IMPORTS.items()
        for t in targets
        if t.startswith("marin_assets.experiments") and _room(m) not in allowed
    ]
    assert not below, below


def test_nothing_imports_the_command():
    """``marin_assets.cli`` is the top floor: it dispatches to the modules below, never the reverse."""
    users = [(m, t) for m, targets in IMPORTS.items() for t in targets if t.startswith("marin_assets.cli")]
    assert not [(m, t) for m, t in users if _room(m) != "cli"], users


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


MODULE_IMPORTS = _imports(modules=True)


def test_no_module_reaches_itself_through_its_imports():
    """No circle of modules, lazy imports included (a package's ``__init__`` importing its own
    submodules is no circle: the submodule does not name the package)."""
    assert not _circles(MODULE_IMPORTS)


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lm_eval_task_data_sits_below_training_and_evaluation():
    """``eval_data`` (task data offline, the lm-eval subprocess) serves both in-training evals and the
    evaluation step, so it imports neither; training names no module of the evaluation step."""
    assert {"marin_assets.eval_data.task_data", "marin_assets.eval_data.lm_eval_main"} <= set(MODULES)
    up = [(m, t) for m, t in _arrows("eval_data") if _room(t) in ("training", "evaluation", "experiments")]
    back = [(m, t) for m, t in _arrows("training") if _room(t) == "evaluation"]
    assert not up and not back, up + back


def test_no_room_imports_a_room_that_imports_it_back():
    rooms: dict[str, set[str]] = {}
    for module, targets in MODULE_IMPORTS.items():
        for target in targets:
            if _room(target) != _room(module):
                rooms.setdefault(_room(module), set()).add(_room(target))
    assert not _circles(rooms), _circles(rooms)


# Marin's module paths, whose job includes offering Marin's names from where Marin keeps them
# (``from marin.execution.executor import ExecutorStep``): the only modules besides packages'
# ``__init__`` that may pass on a name they import.
MARIN_PATHS = frozenset(
    {
        "marin_assets.execution.executor",
        "marin_assets.training.training",
        "marin_assets.processing.classification.dedupe",
        "marin_assets.download.huggingface.download",
        "marin_resources.resource_config",
    }
)


def _defined_and_imported(path: pathlib.Path) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """A module's own top-level names, and the names it imports (name -> (module, original name))."""
    defined: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.update({a.asname or a.name: (node.module, a.name) for a in node.names})
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return defined, imported


def test_every_name_is_imported_from_the_module_that_owns_it():
    """A split is finished when no caller imports a name through a module that only passes it on
    (packages' ``__init__`` and Marin's own module paths excepted)."""
    tables = {module: _defined_and_imported(path) for module, path in MODULES.items()}
    passed_on = []
    for module, path in MODULES.items():
        for node in _import_nodes(path.read_text(encoding="utf-8")):
            if not isinstance(node, ast.ImportFrom) or node.module not in tables or node.level != 0:
                continue
            if node.module in MARIN_PATHS or MODULES[node.module].name == "__init__.py":
                continue
            defined, imported = tables[node.module]
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES or alias.name in defined:
                    continue
                if alias.name in imported:
                    passed_on.append(f"{module}: {alias.name} from {node.module} (owned by {imported[alias.name][0]})")
    assert not passed_on, passed_on
