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

from marin_assets.execution.dry_run import explain_run
from marin_assets.execution.status import STATUS_SUCCESS, read_status
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
