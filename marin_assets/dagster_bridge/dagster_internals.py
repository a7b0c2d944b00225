"""Every use of Dagster's private API (``dagster._*``) in the project, in one place.

Dagster has no public name for these; each entry says what it is for and what breaks when a Dagster
upgrade moves it. Nothing else in the project imports ``dagster._`` (``tests/dagster_bridge/
test_dagster_internals.py`` checks), so an upgrade is checked here and nowhere else.

* :data:`DATA_VERSION_TAG` -- the tag an asset observation carries its data version in (what
  Dagster's own observable source assets write; ``AssetObservation`` takes no data version). Read
  at import: the ``partition_sets`` observations (``partition_sets.py``) need it. If it moves, the
  persisted value (``"dagster/data_version"``: Dagster reads it from every stored event, so it
  cannot change without a migration) is used and one warning says so; should Dagster ever rename
  the tag itself, partition-set observations stop carrying a data version and steps that read
  every partition no longer turn *unsynced* when a drop is added (``test_partition_set_tag_*``
  fails). :data:`CODE_VERSION_TAG`, :data:`DATA_VERSION_IS_USER_PROVIDED_TAG`,
  :data:`INPUT_DATA_VERSION_TAG_PREFIX` and :data:`INPUT_EVENT_POINTER_TAG_PREFIX` come from the
  same module with the same fallback: the tags a materialization Dagster computes carries, which
  the materializations this project logs itself (an input a run brought along, a command-line
  run's record) carry too, so staleness reads them as it reads Dagster's own.
* The rest are imported when called, so a move breaks only its caller, never the code location:
  :func:`stale_causes` / :func:`stale_status` (what the UI's *Unsynced* shows; Dagster serves it
  only through GraphQL) for the tests; :func:`validated_instance_config` (a ``dagster.yaml``
  checked against Dagster's schema) for the deployment tests; :func:`code_server_snapshots`
  (what a code server sends the webserver) for ``bench/location_load.py``; :func:`set_run_times`
  (a recorded command-line run's real start and end, its *Duration*) for ``recording.py``.
"""

from __future__ import annotations

import logging
from typing import Any

import dagster as dg

PERSISTED_DATA_VERSION_TAG = "dagster/data_version"

try:
    from dagster._core.definitions.data_version import (
        CODE_VERSION_TAG,
        DATA_VERSION_IS_USER_PROVIDED_TAG,
        DATA_VERSION_TAG,
        INPUT_DATA_VERSION_TAG_PREFIX,
        INPUT_EVENT_POINTER_TAG_PREFIX,
    )
except ImportError as exc:  # a Dagster upgrade moved it: the persisted value is the same (see above)
    logging.getLogger(__name__).warning(
        "dagster %s: dagster._core.definitions.data_version.DATA_VERSION_TAG is gone (%s); partition-set "
        "observations use the persisted tag %r (update marin_assets/dagster_bridge/dagster_internals.py)",
        dg.__version__,
        exc,
        PERSISTED_DATA_VERSION_TAG,
    )
    DATA_VERSION_TAG = PERSISTED_DATA_VERSION_TAG
    CODE_VERSION_TAG = "dagster/code_version"
    DATA_VERSION_IS_USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
    INPUT_DATA_VERSION_TAG_PREFIX = "dagster/input_data_version"
    INPUT_EVENT_POINTER_TAG_PREFIX = "dagster/input_event_pointer"


def _stale_resolver(defs: dg.Definitions, instance: dg.DagsterInstance) -> Any:
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._time import get_current_datetime

    graph = defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def stale_causes(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> list[tuple[str, str]]:
    """Dagster's stale causes of ``key`` (what the UI's *Unsynced* lists) as (category, dependency key)."""
    return [
        (cause.category.value, cause.dependency.asset_key.to_user_string() if cause.dependency else "")
        for cause in _stale_resolver(defs, instance).get_stale_causes(key)
    ]


def stale_status(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    """Dagster's stale status of ``key``: ``"FRESH"``, ``"STALE"`` or ``"MISSING"``."""
    return _stale_resolver(defs, instance).get_status(key).value


def validated_instance_config(dagster_home: str) -> dict[str, Any]:
    """The ``dagster.yaml`` of ``dagster_home`` as Dagster validates it (raises on a schema error)."""
    from dagster._core.instance.config import dagster_instance_config

    validated, _ = dagster_instance_config(dagster_home)
    return validated


def code_server_snapshots(repository: Any) -> list[Any]:
    """The snapshots a code server sends the webserver for ``repository``: the repository's, then each job's."""
    from dagster._core.remote_representation.external_data import JobDataSnap, RepositorySnap

    snap = RepositorySnap.from_def(repository, defer_snapshots=True)
    return [snap] + [JobDataSnap.from_job_def(job, include_parent_snapshot=True) for job in repository.get_all_jobs()]


def set_run_times(instance: dg.DagsterInstance, run_id: str, started: float, ended: float) -> None:
    """Make a finished run's start and end times (the UI's *Duration*) ``started`` and ``ended``.

    For the record of a command-line run (``recording.py``), written when the command ended: its
    Dagster run would otherwise last as long as the recording. The run storage takes a run event's
    time as the run's start or end (``handle_run_event``); the run's start and its final status are
    replayed there at the given times, and nothing is added to its event log.
    """
    from datetime import UTC, datetime

    from dagster._core.events import DagsterEvent, DagsterEventType

    run = instance.get_run_by_id(run_id)
    if run is None or not run.is_finished:
        raise ValueError(f"run {run_id} is not a finished run of this instance")
    final = {
        dg.DagsterRunStatus.SUCCESS: DagsterEventType.RUN_SUCCESS,
        dg.DagsterRunStatus.FAILURE: DagsterEventType.RUN_FAILURE,
        dg.DagsterRunStatus.CANCELED: DagsterEventType.RUN_CANCELED,
    }[run.status]
    for event_type, when in ((DagsterEventType.RUN_START, started), (final, ended)):
        instance.run_storage.handle_run_event(
            run_id,
            DagsterEvent(event_type_value=event_type.value, job_name=run.job_name),
            update_timestamp=datetime.fromtimestamp(when, UTC),
        )
