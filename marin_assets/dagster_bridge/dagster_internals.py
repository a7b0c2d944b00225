"""Every use of Dagster's private API (``dagster._*``) in the project, in one place.

Dagster has no public name for these; each entry says what it is for and what breaks when a Dagster
upgrade moves it. Nothing else in the product imports ``dagster._`` (``tests/dagster_bridge/
test_dagster_internals.py`` checks; the tests' own uses -- what the UI's *Unsynced* shows, a
``dagster.yaml`` checked against Dagster's schema -- are in ``tests/dagster_private.py``), so an
upgrade is checked here and there only.

* Dagster's tag names (it has no public constants for them), read at import and used everywhere
  instead of strings: :data:`DATA_VERSION_TAG` -- the tag an asset observation carries its data
  version in (what Dagster's own observable source assets write; ``AssetObservation`` takes no data
  version; the ``partition_sets`` observations need it) -- and the code-version, input-version,
  partition and resume-retry tags the recorder (``recording.py``) and the step op (``step_run.py``)
  write and read. If they move, the
  persisted values (:data:`PERSISTED_TAGS`: Dagster reads them from every stored event, so they
  cannot change without a migration) are used and one warning says so; should Dagster ever rename
  the tag itself, partition-set observations stop carrying a data version and steps that read
  every partition no longer turn *unsynced* when a drop is added (``test_partition_set_tag_*``
  fails).
* :func:`code_server_snapshots` (what a code server sends the webserver, for
  ``bench/location_load.py``) and :func:`set_run_times` (a recorded command-line run's real start
  and end, its *Duration*, for ``recording.py``) are imported when called, so a move breaks only
  their caller, never the code location.
"""

from __future__ import annotations

import logging
from typing import Any

import dagster as dg

PERSISTED_DATA_VERSION_TAG = "dagster/data_version"
# The values Dagster persists in every stored event and run (it reads them back, so they cannot
# change without a migration): the fallback when a Dagster upgrade moves the names below.
PERSISTED_TAGS = {
    "CODE_VERSION_TAG": "dagster/code_version",
    "DATA_VERSION_TAG": PERSISTED_DATA_VERSION_TAG,
    "DATA_VERSION_IS_USER_PROVIDED_TAG": "dagster/data_version_is_user_provided",
    "INPUT_DATA_VERSION_TAG_PREFIX": "dagster/input_data_version",
    "INPUT_EVENT_POINTER_TAG_PREFIX": "dagster/input_event_pointer",
    "PARTITION_NAME_TAG": "dagster/partition",
    "RESUME_RETRY_TAG": "dagster/is_resume_retry",
}


def _dagster_tags() -> dict[str, str]:
    """The tag names as Dagster defines them; the persisted values (one warning) if they moved."""
    try:
        from dagster._core.definitions import data_version
        from dagster._core.storage import tags

        return {name: str(getattr(data_version, name, None) or getattr(tags, name)) for name in PERSISTED_TAGS}
    except (ImportError, AttributeError) as exc:  # a Dagster upgrade moved them: the values are the same
        logging.getLogger(__name__).warning(
            "dagster %s: a tag name moved out of dagster._core (%s); the persisted tags %s are used "
            "(update marin_assets/dagster_bridge/dagster_internals.py)",
            dg.__version__,
            exc,
            PERSISTED_TAGS,
        )
        return dict(PERSISTED_TAGS)


_TAGS = _dagster_tags()
CODE_VERSION_TAG = _TAGS["CODE_VERSION_TAG"]
DATA_VERSION_TAG = _TAGS["DATA_VERSION_TAG"]
DATA_VERSION_IS_USER_PROVIDED_TAG = _TAGS["DATA_VERSION_IS_USER_PROVIDED_TAG"]
INPUT_DATA_VERSION_TAG_PREFIX = _TAGS["INPUT_DATA_VERSION_TAG_PREFIX"]
INPUT_EVENT_POINTER_TAG_PREFIX = _TAGS["INPUT_EVENT_POINTER_TAG_PREFIX"]
PARTITION_NAME_TAG = _TAGS["PARTITION_NAME_TAG"]
RESUME_RETRY_TAG = _TAGS["RESUME_RETRY_TAG"]


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


def partitions_data_version(instance: dg.DagsterInstance, key: dg.AssetKey, partition_keys: list[str]) -> str | None:
    """The data version Dagster gives a partitioned input read whole by an unpartitioned step: a
    hash of its partitions' latest data versions in partition-key order (Dagster's
    ``_get_partitions_data_version_from_keys``). For ``step_run``: an input brought along whose
    partitions this run materialized after the op started, when Dagster had already read it.
    None at or above Dagster's threshold, where Dagster reads the latest event's version instead.
    """
    from hashlib import sha256

    from dagster._core.definitions.data_version import SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD
    from dagster._core.events import DagsterEventType

    if len(partition_keys) >= SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD:
        return None
    tags = instance.event_log_storage.get_latest_tags_by_partition(
        key, DagsterEventType.ASSET_MATERIALIZATION, [DATA_VERSION_TAG], asset_partitions=list(partition_keys)
    )
    versions = [pair[1][DATA_VERSION_TAG] for pair in sorted(tags.items(), key=lambda pair: pair[0])]
    return sha256("".join(versions).encode("utf8")).hexdigest()
