"""Every use of Dagster's private API (``dagster._*``) in the project, in one place.

Dagster has no public name for these; each entry says what it is for and what breaks when a Dagster
upgrade moves it. Nothing else in the product imports ``dagster._`` (``tests/dagster_bridge/
test_dagster_internals.py`` checks; the tests' own uses -- what the UI's *Unsynced* shows, a
``dagster.yaml`` checked against Dagster's schema -- are in ``tests/dagster_private.py``), so an
upgrade is checked here and there only.

* :data:`DATA_VERSION_TAG` -- the tag an asset observation carries its data version in (what
  Dagster's own observable source assets write; ``AssetObservation`` takes no data version). Read
  at import: the ``partition_sets`` observations (``partition_sets.py``) need it. If it moves, the
  persisted value (``"dagster/data_version"``: Dagster reads it from every stored event, so it
  cannot change without a migration) is used and one warning says so; should Dagster ever rename
  the tag itself, partition-set observations stop carrying a data version and steps that read
  every partition no longer turn *unsynced* when a drop is added (``test_partition_set_tag_*``
  fails).
* :func:`code_server_snapshots` (what a code server sends the webserver, for
  ``bench/location_load.py``) is imported when called, so a move breaks only its caller, never the
  code location.
"""

from __future__ import annotations

import logging
from typing import Any

import dagster as dg

PERSISTED_DATA_VERSION_TAG = "dagster/data_version"

try:
    from dagster._core.definitions.data_version import DATA_VERSION_TAG
except ImportError as exc:  # a Dagster upgrade moved it: the persisted value is the same (see above)
    logging.getLogger(__name__).warning(
        "dagster %s: dagster._core.definitions.data_version.DATA_VERSION_TAG is gone (%s); partition-set "
        "observations use the persisted tag %r (update marin_assets/dagster_bridge/dagster_internals.py)",
        dg.__version__,
        exc,
        PERSISTED_DATA_VERSION_TAG,
    )
    DATA_VERSION_TAG = PERSISTED_DATA_VERSION_TAG


def code_server_snapshots(repository: Any) -> list[Any]:
    """The snapshots a code server sends the webserver for ``repository``: the repository's, then each job's."""
    from dagster._core.remote_representation.external_data import JobDataSnap, RepositorySnap

    snap = RepositorySnap.from_def(repository, defer_snapshots=True)
    return [snap] + [JobDataSnap.from_job_def(job, include_parent_snapshot=True) for job in repository.get_all_jobs()]
