"""How one Dagster materialization runs its step's unit: explicit, with its inputs, and explained.

Glue between Dagster's view and the engine (no stage logic):

* **Explicit request.** Materializing an asset from the UI, a job, a schedule or a sensor is a
  request to have it: a step whose last attempt FAILED is re-run (the command line's
  ``--force_run_failed``, which a UI user cannot pass). Only the observer that records a
  command-line run (tag ``marin/source=executor_main``) never re-runs anything.
* **Inputs come along.** Dependency units that are not SUCCESS -- e.g. the tokenized cache of a
  drop that arrived after the last training, when the nightly job re-trains -- are run first by the
  engine (``step_run._bring_inputs``), in dependency order, and recorded as materializations of
  their own assets, so the run never fails on "dependency ... is not started" and the UI shows what
  was computed.
* **Why.** The reason a unit runs, root cause first (:func:`~marin_assets.execution.dry_run.explain_run`),
  goes into the materialization's metadata as ``marin/reason``.
* **Code version without the drop set.** A step's Dagster code version hashes its version with
  every ``consumed_partitions`` list left out: adding a drop changes data versions and paths, never
  code versions, so the UI stays true without *Reload definitions*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.dagster_internals import (
    CODE_VERSION_TAG,
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
    INPUT_DATA_VERSION_TAG_PREFIX,
    INPUT_EVENT_POINTER_TAG_PREFIX,
)
from marin_assets.execution.dry_run import explain_run
from marin_assets.execution.status import STATUS_SUCCESS, StatusRecord, read_info, read_status
from marin_assets.execution.units import Unit
from marin_assets.execution.versioning import ResolvedStep, hash_version

SOURCE_TAG = "marin/source"
CLI_RECORDING_SOURCE = "executor_main"


def is_explicit_request(run_tags: Mapping[str, str]) -> bool:
    """True unless the run only records a command-line run (which must never recompute)."""
    return run_tags.get(SOURCE_TAG) != CLI_RECORDING_SOURCE


def _without_partition_sets(version: Any) -> Any:
    if isinstance(version, dict):
        return {k: _without_partition_sets(v) for k, v in version.items() if k != "consumed_partitions"}
    if isinstance(version, list):
        return [_without_partition_sets(v) for v in version]
    return version


_CACHE_ATTR = "_marin_code_version"


def _code_version(node: ResolvedStep) -> tuple[bool, str]:
    """(whether the version holds a ``consumed_partitions`` list, the code version), cached on the node.

    Computed once per resolved step: a dependency's version is nested in every dependent's, so
    walking it again for each asset, key and dep was quadratic in a deep graph.
    """
    cached = node.__dict__.get(_CACHE_ATTR)
    if cached is None:
        depends = "consumed_partitions" in node.version or any(
            _code_version(d)[0] for d in (*node.dependencies, *node.pseudo_dependencies)
        )
        cached = (depends, hash_version(_without_partition_sets(node.version)) if depends else node.hash)
        node.__dict__[_CACHE_ATTR] = cached
    return cached


def depends_on_partition_set(node: ResolvedStep) -> bool:
    """True when the step's version (or a dependency's) holds the list of partitions it consumed."""
    return _code_version(node)[0]


def code_version_of(node: ResolvedStep) -> str:
    """The step's hash with every ``consumed_partitions`` left out (its hash when it consumes none)."""
    return _code_version(node)[1]


def version_tags(node: ResolvedStep, inputs: Mapping[dg.AssetKey, tuple[str | None, int | None]]) -> dict[str, str]:
    """The tags Dagster's staleness reads, for a materialization this project logs itself.

    A materialization Dagster computes (an op's ``MaterializeResult``) carries its asset's code
    version, its data version and each input's data version and event; one logged with
    ``log_event`` or recorded from the command line carries none unless given, and then Dagster
    compares nothing: an edited step stays *FRESH* (issue 36). ``inputs`` maps each input key to
    (its data version, the storage id of the event that holds it); a None version is left out.
    """
    tags = {
        CODE_VERSION_TAG: code_version_of(node),
        DATA_VERSION_TAG: node.hash,
        DATA_VERSION_IS_USER_PROVIDED_TAG: "true",
    }
    for key, (version, storage_id) in inputs.items():
        if version is not None:
            tags[f"{INPUT_DATA_VERSION_TAG_PREFIX}/{key.to_user_string()}"] = version
            tags[f"{INPUT_EVENT_POINTER_TAG_PREFIX}/{key.to_user_string()}"] = str(storage_id) if storage_id else "NULL"
    return tags


def recorded_seconds(output_path: str, status: StatusRecord) -> float | None:
    """How long the attempt that wrote ``status`` (SUCCESS) took: its status's time minus the start
    its ``.executor_info`` records; None when the info predates that field or does not match."""
    info = read_info(output_path)
    if not info or not isinstance(info.get("started"), (int, float)) or not status.time:
        return None
    if info.get("run_id") != status.run_id:  # the info of a later attempt that did not finish
        return None
    seconds = status.time - float(info["started"])
    return seconds if seconds >= 0 else None


def unit_label(unit: Unit) -> str:
    node, partition = unit
    return node.name if partition is None else f"{node.name}[{partition}]"


def reason_for(unit: Unit) -> str:
    """Why the unit would run now (root cause first), or that it is cached."""
    node, partition = unit
    status = read_status(node.partition_output_path(partition))
    if status is not None and status.status == STATUS_SUCCESS:
        return "cached: SUCCESS"
    return explain_run(node, partition, status.status if status is not None else None)[0]
