"""What the catalog shows of a step before anything runs: its asset spec, checks and static metadata.

One asset per distinct step: the asset key comes from the step name (``tokenized/web`` ->
``["tokenized", "web_tokens"]``, see :func:`~marin_assets.dagster_bridge.location_graph.asset_key_for`),
the code version is the step's hash (drop sets left out, see ``unit_run.code_version_of``), deps
come from the step's inputs, and the group is the experiment. Each spec is paired with the
:class:`StepTarget` the op runs for it (:mod:`marin_assets.dagster_bridge.step_ops`).

Glue only: no stage logic lives here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from marin_assets.browse.links import browser_base_url, browser_url
from marin_assets.dagster_bridge.location_graph import AssetKeys, GraphView
from marin_assets.dagster_bridge.metadata import uri_metadata
from marin_assets.dagster_bridge.partition_sets import partition_set_key
from marin_assets.dagster_bridge.unit_run import code_version_of, depends_on_partition_set
from marin_assets.execution.declarations import Experiment, StepCheck, partition_sources
from marin_assets.execution.ray_launch import is_ray_remote_function
from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.step import ExecutorStep, PartitionSource
from marin_assets.execution.step_attempt import function_name
from marin_assets.execution.versioning import ResolvedStep, StepGraph, version_json
from marin_resources.accelerators import CpuConfig
from marin_resources.resource_config import CpuOnlyConfig


@dataclass(frozen=True)
class StepTarget:
    """What running one step's asset needs (the op resolves it under the run's prefix and drops).

    ``sources`` are the experiment's partition-set sources; ``source_error`` says why a set has
    none (the run fails with it instead of running over zero partitions).
    """

    step: ExecutorStep
    experiment: Experiment
    checks: tuple[StepCheck, ...]
    keys: AssetKeys
    sources: Mapping[str, PartitionSource]
    source_error: str | None


# Name folders of the steps that run for minutes or more (Marin's: tokenization, training, evaluation).
WATCHED_FOLDERS = frozenset({"tokenized", "checkpoints", "evaluation"})


def is_watched(step: ExecutorStep) -> bool:
    """Whether people watch ``step`` run: its own op in a UI run (a bar on the run's timeline, its
    logs, retry, re-execution and termination), see ``step_ops``.

    The step's ``watched`` when set; else a tokenization, training or evaluation step (named under
    ``tokenized/``, ``checkpoints/``, ``evaluation/``, as Marin's defaults name them) or one asking
    for an accelerator (a GPU or TPU resource config). Cheap steps stay packed in a shared op.
    """
    if step.watched is not None:
        return step.watched
    if "/" in step.name and step.name.split("/", 1)[0] in WATCHED_FOLDERS:
        return True
    return _wants_accelerator(step.resources)


def _wants_accelerator(resources: Any) -> bool:
    if resources is None or isinstance(resources, (CpuConfig, CpuOnlyConfig)):
        return False
    if isinstance(resources, str):
        return resources.lower().startswith(("gpu", "tpu"))
    if isinstance(resources, Mapping):
        return bool(resources.get("num_gpus")) or any("tpu" in str(k).lower() for k in resources)
    return True  # GpuConfig, TpuPodConfig, a TPU spec object


@dataclass
class StepAssetMember:
    """One step's asset, before it is placed in an op (see ``step_ops.assemble_step_ops``)."""

    spec: dg.AssetSpec
    checks: list[dg.AssetCheckSpec]
    target: StepTarget
    partition_set: str | None
    upstream_mappings: dict[dg.AssetKey, str]
    """repr of the partition mapping to each upstream key (Dagster wants one per key within an op)."""
    watched: bool = False
    """An op of its own in a run (:func:`is_watched`)."""


def consumed_sets(node: ResolvedStep) -> list[str]:
    """Partition sets the step reads every partition of."""
    return sorted({d.partitioned_by for d in node.all_partition_inputs if d.partitioned_by is not None})


def plain_version(node: ResolvedStep) -> Any:
    """The version dict as plain JSON (versioned dataclasses/tuples become dicts/lists), secrets redacted."""
    return redact_secrets(json.loads(version_json(node.version)))


def _compact_version(node: ResolvedStep) -> dict[str, Any]:
    """The version as the definition shows it (secrets not yet redacted): the step's own config,
    each dependency as its ``name-hash`` (the full dict nests every ancestor's version -- megabytes
    of snapshot for a large graph; each materialization's ``marin/version`` carries it in full)."""
    # node.version is canonical already (plain JSON types): no encode/decode round trip.
    version: dict[str, Any] = {"name": node.name, "config": node.version.get("config", {})}
    version["dependencies"] = [f"{d.name}-{d.hash}" for d in node.dependencies]
    if node.pseudo_dependencies:
        version["pseudo_dependencies"] = [f"{d.name}-{d.hash}" for d in node.pseudo_dependencies]
    return version


def compact_versions(nodes: Sequence[ResolvedStep]) -> list[Any]:
    """``marin/version`` of each node as its definition shows it, secrets redacted.

    One :func:`redact_secrets` call for all of them: each call scans the environment for secret
    values, which at 10,000 steps was a fifth of building the definitions. Every version is then
    scrubbed of every version's secret values (a superset of its own: never less redacted).
    """
    return redact_secrets([_compact_version(node) for node in nodes])


def browser_link(output_path: str, prefix: str, base_url: str | None = None) -> dict[str, Any]:
    """``marin/browser``: the data browser's page of an output (``$MARIN_BROWSER_URL``, or
    ``base_url`` when given), if below the prefix."""
    url = browser_url(output_path, prefix, base_url)
    return {"marin/browser": dg.MetadataValue.url(url)} if url else {}


def _static_metadata(node: ResolvedStep, prefix: str, version: Any, base_url: str | None = None) -> dict[str, Any]:
    """The definition's metadata; ``version`` is the node's :func:`compact_versions` entry, ``base_url``
    the data browser's (read from the environment once per experiment, not once per step)."""
    step = node.step
    # Few entries on purpose: each is two serialized objects per asset in every snapshot the
    # webserver loads (a 10,000-step location pays ~0.3 s per entry). The step's name and function
    # are in the description (a plain string); its hash is the code version. The browser link is an
    # entry (a link in the UI) rather than markdown in the description, which the catalog shows raw.
    folder = node.output_path.rpartition("/")[0] if depends_on_partition_set(node) else node.output_path
    meta: dict[str, Any] = browser_link(folder, prefix, base_url)
    if depends_on_partition_set(node):
        # Its hash and path follow the drops it consumes, which change without a code reload:
        # materializations carry them (marin/hash, dagster/uri); the definition shows the pattern.
        base = node.output_path.rpartition("/")[0]
        stem = node.name.rpartition("/")[2]
        meta["marin/output_path_pattern"] = f"{base}/{stem}-<hash of version and drops>"
        # Storage on the asset page reads only definition metadata: the glob of its versions'
        # folders (the current one is each materialization's dagster/uri).
        meta["dagster/uri"] = uri_metadata(f"{base}/{stem}-*")
        return _optional_metadata(node, meta)
    meta["marin/version"] = dg.MetadataValue.json(version)
    # Where the output lives, on the asset page (Storage) before any run: the step's folder, which
    # for a partitioned step holds one subfolder per partition.
    meta["dagster/uri"] = uri_metadata(node.output_path)
    if step.partitioned_by is not None:
        meta["marin/output_path_pattern"] = f"{node.output_path}/<{step.partitioned_by}>"
    return _optional_metadata(node, meta)


def _description(node: ResolvedStep) -> str:
    """The asset's description: the step's own, then which step and function it runs. No markdown
    link: the asset catalog shows descriptions as plain text (the browser link is ``marin/browser``
    in the definition metadata, which the UI renders as a link)."""
    own = node.step.description
    where = f"Step {node.name}, function {function_name(node.step.fn)}"
    return f"{own}\n\n{where}" if own else where


def _optional_metadata(node: ResolvedStep, meta: dict[str, Any]) -> dict[str, Any]:
    step = node.step
    if step.resources is not None:
        meta["marin/resources"] = repr(step.resources)
    if step.pip_dependency_groups:
        meta["marin/pip_dependency_groups"] = ", ".join(step.pip_dependency_groups)
    return meta


def _partition_mapping(node: ResolvedStep, dep: ResolvedStep) -> dg.PartitionMapping | None:
    """How a step's partitions map onto a partitioned dependency's (None: Dagster's default)."""
    if dep.partitioned_by is None:
        return None
    specific = sorted({k for d, k in node.specific_partition_inputs if d is dep})
    same = any(d is dep for d in node.same_partition_inputs) and node.partitioned_by == dep.partitioned_by
    if any(d is dep for d in node.all_partition_inputs) or (specific and same):
        return dg.AllPartitionMapping()
    if specific:
        return dg.SpecificPartitionsPartitionMapping(specific)
    return None


def _experiment_sources(
    experiment: Experiment, graph: StepGraph | GraphView
) -> tuple[Mapping[str, PartitionSource], str | None]:
    """Partition sets' sources: given or declared by their steps; else the error a run reports."""
    try:
        partitioned = [n.step for n in graph.topological() if n.partitioned_by is not None]
        return partition_sources(experiment.steps, experiment.partitions, partitioned), None
    except ValueError as exc:
        return experiment.partitions, str(exc)


def step_asset_members(
    experiment: Experiment,
    partitions_defs: dict[str, dg.PartitionsDefinition],
    prefix: str,
    keys: AssetKeys,
    graph: StepGraph | GraphView,
    emitted: dict[dg.AssetKey, str] | None = None,
) -> list[StepAssetMember]:
    """The assets of ``experiment``'s distinct steps (merged duplicates become one asset).

    ``emitted`` (asset key -> code version) carries the steps earlier experiments already turned
    into assets: an experiment that builds on another (the quickstart on curation) reuses them.
    ``partitions_defs`` is shared across experiments (mutated): one DynamicPartitionsDefinition per set.
    """
    sources, source_error = _experiment_sources(experiment, graph)
    checks_by_node: dict[int, list[StepCheck]] = {}
    for check in experiment.checks:
        checks_by_node.setdefault(id(graph.resolved(check.step)), []).append(check)
    eager_nodes = {id(graph.resolved(s)) for s in experiment.eager_steps}
    seen_keys: dict[dg.AssetKey, str] = {}
    key_of: dict[int, dg.AssetKey] = {}  # id(node) -> its key, for the deps below (one lookup each)
    own: list[tuple[ResolvedStep, dg.AssetKey]] = []  # the steps that become assets here, in order
    for node in graph.topological():
        key = keys.key_for(node)
        if key in seen_keys:
            raise ValueError(
                f"steps {seen_keys[key]!r} and {node.name!r} map to the same asset key {key.to_user_string()}"
            )
        seen_keys[key] = node.name
        key_of[id(node)] = key
        if emitted is not None:
            if key in emitted:
                continue  # another experiment's asset: same key means same name and code version
            emitted[key] = code_version_of(node)
        own.append((node, key))
    versions = compact_versions([node for node, _ in own])
    base_url = browser_base_url()
    members: list[StepAssetMember] = []
    for (node, key), version in zip(own, versions, strict=True):
        deps = []
        for dep in (*node.dependencies, *node.pseudo_dependencies):
            # The graph's topological order holds every dependency, so its key is known already.
            dep_key = key_of.get(id(dep)) or keys.key_for(dep)
            deps.append(dg.AssetDep(dep_key, partition_mapping=_partition_mapping(node, dep)))
        # Reading every partition: the partition set is an input too (its data version = its keys).
        deps.extend(dg.AssetDep(partition_set_key(name)) for name in consumed_sets(node))
        node_checks = checks_by_node.get(id(node), [])
        if node.partitioned_by is not None:
            partitions_defs.setdefault(node.partitioned_by, dg.DynamicPartitionsDefinition(name=node.partitioned_by))
        spec = dg.AssetSpec(
            key=key,
            deps=deps,
            code_version=code_version_of(node),
            group_name=keys.group_of(node) or experiment.name,
            description=_description(node),
            metadata=_static_metadata(node, prefix, version, base_url),
            kinds={"ray"} if (node.step.resources is not None or is_ray_remote_function(node.step.fn)) else None,
            automation_condition=dg.AutomationCondition.eager() if id(node) in eager_nodes else None,
        )
        check_specs = [
            dg.AssetCheckSpec(c.name, asset=key, description=c.description, blocking=c.blocking) for c in node_checks
        ]
        target = StepTarget(node.step, experiment, tuple(node_checks), keys, sources, source_error)
        wanted = {d.asset_key: repr(d.partition_mapping) for d in deps}
        members.append(StepAssetMember(spec, check_specs, target, node.partitioned_by, wanted, is_watched(node.step)))
    return members


__all__ = [
    "StepAssetMember",
    "StepTarget",
    "browser_link",
    "consumed_sets",
    "is_watched",
    "plain_version",
    "step_asset_members",
]
