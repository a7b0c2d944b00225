"""The code location's graph: the asset key of each step, one shared resolution of every
experiment's steps, and which steps a drop's run covers.

Keys are named across the whole location (:class:`AssetKeys`), so a step reached from several
scripts is one asset, and each experiment sees its part of one shared :class:`StepGraph`
(:class:`GraphView`) instead of resolving its upstream steps again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import dagster as dg

from marin_assets.dagster_bridge.unit_run import code_version_of
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.step import ExecutorStep, InputName
from marin_assets.execution.versioning import ResolvedStep, StepGraph

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


def partition_local_steps(graph: StepGraph, partition_set: str) -> list[ResolvedStep]:
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
    """Asset keys of a whole code location, so the same step is one asset however many scripts reach it.

    A step name with one code version across every graph added keeps its name as key; a name with
    several (a sweep, or two scripts with different versions of a step) gets one key per version,
    ``<name>-<code version>``, so they stay distinct assets instead of one overwriting the other.
    """

    def __init__(self, graphs: Sequence[StepGraph | GraphView] = ()) -> None:
        self._versions: dict[str, set[str]] = {}
        # (name, code version) -> key: a key is asked for once per asset and once per dependent.
        self._keys: dict[tuple[str, str], dg.AssetKey] = {}
        for graph in graphs:
            self.add(graph)

    def add(self, graph: StepGraph | GraphView) -> None:
        """Count the code versions of ``graph``'s steps."""
        self._keys.clear()
        for node in graph.topological():
            self._versions.setdefault(node.name, set()).add(code_version_of(node))

    def key_for(self, node: ResolvedStep) -> dg.AssetKey:
        """The asset key of ``node`` (a step resolved under any partition keys)."""
        code_version = code_version_of(node)
        key = self._keys.get((node.name, code_version))
        if key is None:
            versions = self._versions.get(node.name)
            if versions is None or len(versions) > 1 or code_version not in versions:
                key = asset_key_for(f"{node.name}-{code_version}" if versions else node.asset_name)
            else:
                key = asset_key_for(node.name)
            if versions is not None:  # unknown steps fall back on their graph's asset_name: not cached
                self._keys[(node.name, code_version)] = key
        return key

    def known(self, node: ResolvedStep) -> bool:
        """True when the location defines an asset for this step (same name and code version)."""
        return code_version_of(node) in self._versions.get(node.name, ())


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
