"""The code location's graph: the asset key of each step, one shared resolution of every
experiment's steps, and which steps a drop's run covers.

Keys are named across the whole location (:class:`AssetKeys`), so a step reached from several
scripts is one asset, and each experiment sees its part of one shared :class:`StepGraph`
(:class:`GraphView`) instead of resolving its upstream steps again.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence

import dagster as dg

from marin_assets.dagster_bridge.unit_run import code_version_of
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.discovery import Script
from marin_assets.execution.step import ExecutorStep, InputName, defining_globals
from marin_assets.execution.versioning import ResolvedStep, StepGraph

logger = logging.getLogger("marin.definitions")
_INVALID_KEY_CHARS = re.compile(r"[^A-Za-z0-9_]")
# Folder of a model step -> what its asset is (appended to the key's last part, see asset_key_for).
_QUALIFIER = re.compile(r"^(.*?)((?:_heldout|_validation|_val|_test_set)?)$")
_KIND_OF_FOLDER = {"tokenizers": "tokenizer", "tokenized": "tokens", "checkpoints": "model", "evaluation": "eval"}


def asset_key_for(step_name: str) -> dg.AssetKey:
    """Asset key of a step: its '/'-separated name, with characters Dagster rejects as '_'.

    Pass a step's ``asset_name`` (``ResolvedStep.asset_name``): a sweep's versions of one name get
    one asset each (``sweep/train-ab0bb1`` -> ``["sweep", "train_ab0bb1"]``).

    Model steps are named after their experiment under a folder per kind (``tokenizers/<name>``,
    ``tokenized/<name>``, ``checkpoints/<name>``, ``evaluation/<name>``), and the UI labels a
    lineage node with the key's last part only: that part gets the kind, so the quickstart's nodes
    read ``quickstart_tiny_tokenizer``, ``_tokens``, ``_model``, ``_eval`` instead of four
    ``quickstart_tiny``.
    """
    parts = [_INVALID_KEY_CHARS.sub("_", part) for part in step_name.split("/")]
    kind = _KIND_OF_FOLDER.get(parts[0]) if len(parts) > 1 else None
    if kind and not parts[-1].endswith(f"_{kind}") and f"_{kind}_" not in parts[-1]:
        # A qualifier (``-heldout``) stays last, after the kind: the UI middle-truncates long labels
        # to their start and end, and "quickstart…_tokens" twice would not tell the caches apart.
        stem, qualifier = _QUALIFIER.match(parts[-1]).groups()
        parts[-1] = f"{stem}_{kind}{qualifier}" if stem else f"{parts[-1]}_{kind}"
    return dg.AssetKey(parts)


def partition_local_steps(graph: StepGraph | GraphView, partition_set: str) -> list[ResolvedStep]:
    """Partitioned steps whose run for one partition needs nothing of another partition (transitively).

    Their inputs are the same partition of other such steps and *partition-free* steps -- steps
    that read no partition at all, like the quality classifier trained on its own labelled set
    (a run brings those along when they are missing). So one run per new drop covers raw -> text
    -> quality -> dedup -> consolidated, while steps that read every partition (training) or one
    fixed partition wait outside it.
    """
    local: dict[int, bool] = {}
    free: dict[int, bool] = {}

    def is_partition_free(node: ResolvedStep) -> bool:
        if id(node) not in free:
            free[id(node)] = node.partitioned_by is None and all(
                is_partition_free(d) for d in (*node.dependencies, *node.pseudo_dependencies)
            )
        return free[id(node)]

    def is_local(node: ResolvedStep) -> bool:
        if id(node) not in local:
            local[id(node)] = (
                node.partitioned_by == partition_set
                and not node.all_partition_inputs
                and not node.specific_partition_inputs
                and all(is_local(d) or is_partition_free(d) for d in (*node.dependencies, *node.pseudo_dependencies))
            )
        return local[id(node)]

    return [n for n in graph.topological() if is_local(n)]


class AssetKeys:
    """Asset keys and groups of a whole code location, stable across edits of versioned values.

    A step name with one config across the location keeps its name as key (``asset_key_for``), so
    editing a ``versioned(...)`` value changes the asset's code version, never its key: its
    materializations, checks and plots stay on one asset. A name with several configs (a sweep
    reusing a name, in one script or across scripts) gets one key per config that names the
    variant by where it is defined -- ``<last part>__<script>_<variable>`` (``train_small__sweep_RUNS_1``)
    -- not by its hash, so those keys survive edits too.

    A step reached from several experiments belongs to the group of the script that defines it
    (:attr:`~marin_assets.execution.step.ExecutorStep.defined_in`), not of the first script that
    happens to reach it.
    """

    def __init__(
        self,
        graphs: Sequence[StepGraph | GraphView] = (),
        groups: Sequence[str] | None = None,
        modules: Mapping[str, str] | None = None,
    ) -> None:
        """``groups`` names each graph's experiment; ``modules`` maps a module name to its group."""
        self._versions: dict[str, dict[str, ResolvedStep]] = {}
        self._reached_by: dict[int, dict[str, None]] = {}  # id(node) -> groups reaching it, in order
        self._definitions: dict[int, ExecutorStep] = {}  # id(node) -> the step object defining it
        self._modules = dict(modules or {})
        self._paths: dict[str, dict[int, str]] = {}  # module -> id(step) -> variable path
        self._keys: dict[tuple[str, str], dg.AssetKey] = {}
        for index, graph in enumerate(graphs):
            self.add(graph, groups[index] if groups is not None else None)

    def add(self, graph: StepGraph | GraphView, group: str | None = None) -> None:
        """Count the configs of ``graph``'s steps (reached from the experiment ``group``)."""
        self._keys.clear()
        engine = graph.graph if isinstance(graph, GraphView) else graph
        for node in graph.topological():
            node_id = id(node)
            if node_id not in self._definitions:  # a node shared by several experiments' views: once
                self._versions.setdefault(node.name, {}).setdefault(code_version_of(node), node)
                self._definitions[node_id] = engine.definition_of(node)
            if group is not None:
                self._reached_by.setdefault(node_id, {})[group] = None

    def group_of(self, node: ResolvedStep) -> str | None:
        """The group showing ``node``: its defining script's when that script is in the location."""
        reachers = self._reached_by.get(id(node), {})
        for module in self._definitions.get(id(node), node.step).defined_in:
            group = self._modules.get(module)
            if group is not None and (group in reachers or not reachers):
                return group
        return next(iter(reachers), None)

    def variants(self) -> dict[str, list[ResolvedStep]]:
        """Step names with several configs in the location -> one node per config."""
        return {name: list(v.values()) for name, v in self._versions.items() if len(v) > 1}

    def key_for(self, node: ResolvedStep) -> dg.AssetKey:
        """The asset key of ``node`` (a step resolved under any partition keys)."""
        code_version = code_version_of(node)
        key = self._keys.get((node.name, code_version))
        if key is not None:
            return key
        versions = self._versions.get(node.name)
        if versions is None:  # a step the location does not define: not cached
            return asset_key_for(node.asset_name)
        if code_version not in versions:
            return asset_key_for(f"{node.name}-{code_version}")
        if len(versions) == 1:
            key = asset_key_for(node.name)
        else:
            self._name_variants(node.name, versions)
            key = self._keys[(node.name, code_version)]
        self._keys[(node.name, code_version)] = key
        return key

    def known(self, node: ResolvedStep) -> bool:
        """True when the location defines an asset for this step (same name and code version)."""
        return code_version_of(node) in self._versions.get(node.name, {})

    def _name_variants(self, name: str, versions: Mapping[str, ResolvedStep]) -> None:
        """Key every config of ``name`` by the script and variable defining it (``v<N>`` without one)."""
        base = asset_key_for(name)
        taken: set[str] = set()
        where = {code_version: self._where(node) for code_version, node in versions.items()}
        for code_version, (script, path) in sorted(where.items(), key=lambda item: item[1]):
            # No variable holds it (built inside a function): numbered within its script, v1, v2...
            label = _INVALID_KEY_CHARS.sub("_", "_".join(p for p in (script, path or "v") if p))
            unique, n = (label, 2) if path else (f"{label}1", 2)
            while unique in taken:
                unique, n = (f"{label}_{n}" if path else f"{label}{n}"), n + 1
            taken.add(unique)
            self._keys[(name, code_version)] = dg.AssetKey([*base.path[:-1], f"{base.path[-1]}__{unique}"])

    def _where(self, node: ResolvedStep) -> tuple[str, str]:
        """(defining script, variable path to the step in that module's globals, or "").

        The script is the innermost defining module that is a script of the location (its group).
        A step built outside any listed script (an explicit experiment list) is named after the
        innermost defining module when that module's globals hold it, else after its group.
        """
        step = self._definitions.get(id(node), node.step)
        scripts = [m for m in step.defined_in if m in self._modules]
        for module in scripts or step.defined_in[:1]:
            path = self._variable_path(module, step)
            if module in self._modules:
                return self._modules[module], path
            if path:
                return _short_name(module), path
        return self.group_of(node) or "", ""

    def _variable_path(self, module: str, step: ExecutorStep) -> str:
        if module not in self._paths:
            self._paths[module] = _variable_paths(defining_globals(module))
        return self._paths[module].get(id(step), "")


def _short_name(module: str) -> str:
    """A module's last component (a script run as ``__main__``: its file's stem)."""
    if module == "__main__":
        path = (defining_globals(module) or {}).get("__file__") or "main"
        return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")
    return module.rsplit(".", 1)[-1]


def _variable_paths(module_globals: Mapping[str, object] | None, depth: int = 3) -> dict[int, str]:
    """id(step) -> where a module's globals hold it: ``model``, ``RUNS_1``, ``runs_lr_3e_4``.

    Looks through lists, tuples and dicts (index or key) up to ``depth`` levels, since a sweep keeps
    its runs in a list or a dict. Globals and dict keys are visited sorted, and the first path
    found wins, so the answer does not depend on insertion order.
    """
    paths: dict[int, str] = {}

    def visit(value: object, path: str, level: int) -> None:
        if isinstance(value, ExecutorStep):
            paths.setdefault(id(value), path)
        elif level < depth and isinstance(value, dict):
            for label, item in sorted(((str(k), v) for k, v in value.items()), key=lambda kv: kv[0]):
                visit(item, f"{path}_{label}", level + 1)
        elif level < depth and isinstance(value, (list, tuple)):
            for index, item in enumerate(value):
                visit(item, f"{path}_{index}", level + 1)

    for attr in sorted(module_globals or ()):
        if not attr.startswith("__"):
            visit(module_globals[attr], attr, 0)
    return paths


def location_asset_keys(
    experiments: Sequence[Experiment],
    graphs: Sequence[StepGraph | GraphView | None],
    scripts: Sequence[Script] | None = None,
    warn: bool = True,
) -> AssetKeys:
    """The location's :class:`AssetKeys`, warning once per step name with several configs.

    ``graphs`` pairs with ``experiments`` (None where an experiment does not resolve); ``scripts``
    maps each script's module to its group so shared steps land in their definer's group.
    """
    modules = {s.module: s.name for s in scripts or () if s.experiment is not None}
    pairs = [(g, e.name) for e, g in zip(experiments, graphs, strict=True) if g is not None]
    keys = AssetKeys([g for g, _ in pairs], [name for _, name in pairs], modules)
    for name, nodes in sorted(keys.variants().items()) if warn else ():
        where = sorted({keys._where(n)[0] or "?" for n in nodes})
        logger.warning(
            "step name %s has several configs in this location (scripts: %s); each gets a key naming its "
            "variant, e.g. %s",
            name,
            ", ".join(where),
            keys.key_for(nodes[0]).to_user_string(),
        )
    return keys


class GraphView:
    """The part of a shared :class:`StepGraph` one experiment reaches (its steps and their inputs).

    Resolving each script's steps in a graph of its own resolves every shared upstream step once per
    script -- quadratic for 100 scripts over one 10,000-step DAG; a view resolves each step once.
    """

    def __init__(self, graph: StepGraph, steps: Sequence[ExecutorStep]) -> None:
        self.graph = graph
        self.prefix = graph.prefix
        self.partitions = graph.partitions
        self.roots = [graph.resolved(s.step if isinstance(s, InputName) else s) for s in steps]
        self._order: list[ResolvedStep] | None = None

    def resolved(self, step: ExecutorStep) -> ResolvedStep:
        return self.graph.resolved(step)

    def partition_keys(self, partition_set: str) -> list[str]:
        return self.graph.partition_keys(partition_set)

    def topological(self) -> list[ResolvedStep]:
        """The experiment's distinct steps, dependencies first (stable order)."""
        if self._order is None:
            order: list[ResolvedStep] = []
            seen: set[int] = set()
            stack: list[tuple[ResolvedStep, bool]] = [(r, False) for r in reversed(self.roots)]
            while stack:  # iterative: a deep chain must not hit the recursion limit
                node, expanded = stack.pop()
                if expanded:
                    order.append(node)
                    continue
                if id(node) in seen:
                    continue
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((d, False) for d in reversed((*node.dependencies, *node.pseudo_dependencies)))
            self._order = order
        return self._order


def location_graphs(experiments: Sequence[Experiment], prefix: str) -> list[StepGraph | GraphView | Exception]:
    """One graph per experiment as the definitions show them, sharing one resolution when they can.

    Experiments whose static partition keys agree share a :class:`StepGraph`; an experiment whose
    steps do not resolve gets its exception (its group shows the error).
    """
    partitions: dict[str, list[str]] = {}
    shared_ok = True
    for experiment in experiments:
        for name, src in experiment.partitions.items():
            keys = [] if callable(src) else sorted(src)
            if partitions.setdefault(name, keys) != keys:
                shared_ok = False
    graphs: list[StepGraph | GraphView | Exception] = []
    if shared_ok:
        try:
            shared = StepGraph([s for e in experiments for s in e.steps], prefix, partitions)
            return [GraphView(shared, e.steps) for e in experiments]
        except Exception:  # noqa: BLE001 - find which experiment fails, one by one below
            pass
    for experiment in experiments:
        try:
            graphs.append(definition_graph(experiment, prefix))
        except Exception as exc:  # noqa: BLE001
            graphs.append(exc)
    return graphs


def definition_graph(experiment: Experiment, prefix: str) -> StepGraph:
    """The experiment's steps resolved as the definitions show them (runtime partition sets empty).

    Partition sets discovered at run time (drops) stay out of the definitions: code versions leave
    them out anyway, and a load must not scan (or checksum) the landing zone.
    """
    partitions = {name: [] if callable(src) else list(src) for name, src in experiment.partitions.items()}
    return StepGraph(experiment.steps, prefix, partitions)
