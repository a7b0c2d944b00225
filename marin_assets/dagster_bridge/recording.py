"""Record a command-line (``executor_main``) run in the Dagster instance.

``executor_main`` computes the steps itself (with its own concurrency); afterwards this observer
materializes the same assets in a real Dagster run tagged with the engine's run id. Each asset
then finds its step SUCCESS and records a materialization -- marked as computed when the
command-line run computed it, as cached otherwise -- so the run and its lineage show in the UI.

The assets are keyed as the code location keys them (its discovered experiment scripts, see
``execution/discovery.py``): a step the location defines (same name and code version) is recorded
on that defined asset, with its lineage and group. A step it does not define (a script the
location does not list, a ``--size`` it does not show, an edit not reloaded yet) is recorded as an
external asset, and the recording says so: a warning naming the steps and the run tag
``marin/undefined_steps``.

Recording happens only when ``$DAGSTER_HOME`` is set (the README's commands set it), because
without it Dagster would use a throwaway instance.

Importing this module registers :func:`record_cli_run` as a run observer of ``executor_main``
(:mod:`marin_assets.execution.observers`); the package declares the module as an observer plugin
(``pyproject.toml``), so ``executor_main`` imports it after the steps ran.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.data_version import extract_data_version_from_entry

from marin_assets.dagster_bridge.assets import RUN_ID_TAG, SOURCE_TAG, Experiment, build_step_assets
from marin_assets.dagster_bridge.location_graph import AssetKeys, location_asset_keys, location_graphs
from marin_assets.dagster_bridge.partition_sets import observation, partition_set_key, partition_set_version
from marin_assets.execution.discovery import ENV_VAR, Script, discover, project_root, script_of_file
from marin_assets.execution.observers import register_run_observer
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.versioning import StepGraph

logger = logging.getLogger("marin.executor")
UNDEFINED_TAG = "marin/undefined_steps"
OBSERVER_NAME = "dagster"
"""The name this module registers its run observer under."""


def location_keys(prefix: str, scripts: Sequence[Script]) -> AssetKeys:
    """The code location's asset keys (the same naming as ``definitions.build_definitions``)."""
    experiments = [s.experiment for s in scripts if s.experiment is not None]
    # A script whose steps do not resolve is an error group in the location: it defines nothing.
    graphs = [None if isinstance(g, Exception) else g for g in location_graphs(experiments, prefix)]
    return location_asset_keys(experiments, graphs, scripts, warn=False)  # the location warns, not each run


def observe_partition_sets(instance: dg.DagsterInstance, nodes: Sequence[Any]) -> None:
    """Observe the partition sets the recorded steps read every partition of, before recording them.

    A materialization stores the data version its inputs had when it ran; the drop set's is its
    latest observation. Without one the recorded training would read "no version", and the first
    observation of the drop set (the ``partition_sets`` sensor, seconds later) would mark the
    model *Upstream data* changed although nothing changed.
    """
    names = sorted({d.partitioned_by for n in nodes for d in n.all_partition_inputs if d.partitioned_by})
    for name in names:
        keys = sorted(instance.get_dynamic_partitions(name))
        latest = instance.get_latest_data_version_record(partition_set_key(name), is_source=True)
        version = extract_data_version_from_entry(latest.event_log_entry) if latest is not None else None
        if version is not None and version.value == partition_set_version(keys):
            continue
        instance.report_runless_asset_event(observation(name, keys))


def _outside_project(caller: str) -> bool:
    return os.path.relpath(os.path.abspath(caller), project_root()).startswith("..")


def how_to_list(caller: str | None) -> str:
    """How to make the code location show the script ``caller`` (a hint for the "not listed" warning)."""
    root = project_root()
    pyproject = os.path.join(root, "pyproject.toml")
    if caller:
        path = os.path.abspath(caller)
        rel = os.path.relpath(path, root)
        if not rel.startswith(".."):
            return (
                f'to show it with lineage, add "{rel}" (or a glob such as "{os.path.dirname(rel) or "."}/*.py") to '
                f"[tool.marin] experiments in {pyproject}, or set {ENV_VAR}={rel}"
            )
        return (
            f"to show it with lineage, set {ENV_VAR}={path} for the code location "
            f"(or list it in [tool.marin] experiments of {pyproject})"
        )
    return f"to show it with lineage, list the script in [tool.marin] experiments of {pyproject} or in {ENV_VAR}"


def record_cli_run(
    graph: StepGraph,
    run_id: str,
    run_only: Sequence[str] | None = None,
    description: str | None = None,
    caller: str | None = None,
    scripts: Sequence[Script] | None = None,
    **_: Any,
) -> list[str]:
    """Materialize the graph's assets in the Dagster instance; returns the Dagster run ids.

    ``caller`` is the script's file (to name its group); ``scripts`` the location's scripts
    (default: discovered as the code location does).
    """
    if not os.environ.get("DAGSTER_HOME"):
        logger.info("DAGSTER_HOME is not set: not recording this run in a Dagster instance")
        return []
    from marin_resources.dagster_resources import MarinStorageResource, RayResource

    instance = dg.DagsterInstance.get()
    units = StepRunner.units(graph, list(run_only) if run_only else None)
    selected_nodes = {id(node): node for node, _ in units}
    scripts = discover() if scripts is None else scripts
    keys = location_keys(graph.prefix, scripts)
    script = script_of_file(caller, scripts) if caller else None
    experiment = Experiment(
        name=script.name if script is not None else "executor_main",
        steps=[n.step for n in graph.roots],
        description=description,
        partitions=graph.partitions,
    )
    tags = {RUN_ID_TAG: run_id, SOURCE_TAG: "executor_main"}
    undefined = sorted({n.name for n in selected_nodes.values() if not keys.known(n)})
    if undefined:
        where = (
            f"script {script.name}" if script is not None else f"{caller or 'this script'} (not listed in [tool.marin])"
        )
        # A script inside the project that its pyproject does not list is worth a warning; one kept
        # elsewhere (a scratch script, another checkout) is a normal way to run: say how, quietly.
        outside = script is None and caller is not None and _outside_project(caller)
        logger.log(
            logging.INFO if outside else logging.WARNING,
            "%d step(s) of %s are not defined in the code location, recorded as external assets without lineage: %s%s%s",
            len(undefined),
            where,
            ", ".join(undefined[:10]),
            " ..." if len(undefined) > 10 else "",
            "" if script is not None else f" -- {how_to_list(caller)}",
        )
        tags[UNDEFINED_TAG] = ", ".join(undefined)[:1000]
    # A step the location lacks keeps a key of its own (<name>-<code version> beside a defined name).
    assets = build_step_assets(experiment, prefix=graph.prefix, keys=keys, graph=graph)
    resources = {"marin_storage": MarinStorageResource(prefix=graph.prefix), "ray": RayResource()}
    # The engine already reported every unit; the recording run's own event log (DEBUG by default,
    # hundreds of lines) goes to the instance, and to the terminal only from this level up.
    level = os.environ.get("MARIN_DAGSTER_LOG_LEVEL", "WARNING").upper()
    run_config = {"loggers": {"console": {"config": {"log_level": level}}}}
    run_ids: list[str] = []
    unpartitioned = [keys.key_for(n) for n in selected_nodes.values() if n.partitioned_by is None]
    partitioned: dict[tuple[str, str], list[dg.AssetKey]] = {}
    for node, partition in units:
        if partition is not None:
            partitioned.setdefault((node.partitioned_by or "", partition), []).append(keys.key_for(node))
    for partition_set, key in partitioned:
        instance.add_dynamic_partitions(partition_set, [key])
    observe_partition_sets(instance, [n for n in selected_nodes.values()])
    # Partitioned assets first (one run per partition key), then the unpartitioned ones.
    for (_, key), asset_keys in sorted(partitioned.items()):
        result = dg.materialize(
            assets,
            instance=instance,
            resources=resources,
            selection=asset_keys,
            partition_key=key,
            tags=tags,
            run_config=run_config,
            raise_on_error=False,
        )
        run_ids.append(result.run_id)
    if unpartitioned:
        result = dg.materialize(
            assets,
            instance=instance,
            resources=resources,
            selection=unpartitioned,
            tags=tags,
            run_config=run_config,
            raise_on_error=False,
        )
        run_ids.append(result.run_id)
    logger.info("recorded in Dagster instance %s as run(s) %s", os.environ["DAGSTER_HOME"], ", ".join(run_ids))
    return run_ids


register_run_observer(OBSERVER_NAME, record_cli_run)
