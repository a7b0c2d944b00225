"""Every use of Ray's private API in this project, and what breaks when one fails.

Ray (2.60) offers no public way to do the few things below. Each function here wraps one of them;
when the private name is gone or fails (a Ray upgrade), it logs once what it swallowed, why the
fallback is safe, and what the user loses -- never silently, and never by failing a step. Nothing
else in the project may import ``ray._private``, ``ray._raylet``, ``ray.dashboard.modules`` or
``ray.experimental.internal_kv`` (``tests/resources/test_ray_internals.py`` checks).

=================================  =================================================================
function                           when it fails
=================================  =================================================================
:func:`reload_client_settings`     a process that imported Ray *before* the embedded head's settings
                                   were put in its environment connects without the token or on the
                                   routable address: the connection is refused, with Ray's error.
                                   Processes that import Ray afterwards are not affected.
:func:`current_job_metadata`       dashboard links name Ray's job id (``01000000``...) instead of the
                                   submission id: after a Ray restart they may open a newer job.
:func:`record_driver_job`          the driver is not in the dashboard's job list; the task page of
                                   ``marin/ray_task`` cannot show its job.
:func:`autoscaler_node_types`      the feasibility check sees only live nodes: a request that only an
                                   autoscaler node type could satisfy is refused instead of waiting
                                   (set ``MARIN_RAY_AUTOSCALER=1`` to skip the check).
:func:`configure_client_builder`   a Ray Client driver's job carries no submission id (links as
                                   above) and its workers' output reaches the driver's console
                                   even when ``MARIN_RAY_LOG_TO_DRIVER=0``.
=================================  =================================================================
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

_WARNED: set[str] = set()
_WARNED_LOCK = threading.Lock()


def _fell_back(what: str, exc: BaseException, consequence: str) -> None:
    """Log once per ``what`` that a private Ray call failed, and what that costs."""
    with _WARNED_LOCK:
        if what in _WARNED:
            return
        _WARNED.add(what)
    logger.warning("Ray internals: %s failed (%s: %s); %s", what, type(exc).__name__, exc, consequence)


def reload_client_settings(loopback_only: bool) -> None:
    """Make an already imported Ray re-read its auth settings (``RAY_AUTH_MODE``, the token file) and,
    with ``loopback_only``, keep 127.0.0.1 as the node address (Ray reads both once at import)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config

        if loopback_only:
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address on every call
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()
    except (ImportError, AttributeError, RuntimeError) as exc:
        _fell_back(
            "reloading Ray's auth/loopback settings",
            exc,
            "the environment variables are set, so processes that import Ray from now on use them; "
            "this one may be refused by a token-protected head",
        )


def current_job_metadata() -> dict[str, str]:
    """The metadata of the calling process's Ray job config (its submission id, for example)."""
    try:
        import ray

        config = ray._private.worker.global_worker.core_worker.get_job_config()
        return {str(k): str(v) for k, v in dict(config.metadata).items()}
    except Exception as exc:  # noqa: BLE001 - any failure of a private call: links fall back, step runs
        _fell_back("reading the Ray job's config", exc, "dashboard links name Ray's job id, not a submission id")
        return {}


def record_driver_job(
    submission_id: str, *, status: str, entrypoint: str, message: str, metadata: dict[str, str], start_ms: int
) -> Any:
    """Write a Jobs-API-style record of a connected driver into Ray's job table (the GCS KV store),
    so that the dashboard's job list and ``#/jobs/<submission id>`` show it. Returns the record (for
    :func:`update_driver_job`), or None when Ray's internals refused."""
    try:
        from ray.dashboard.modules.job.common import JobInfo, JobStatus

        info = JobInfo(
            status=JobStatus(status),
            entrypoint=entrypoint,
            message=message,
            start_time=start_ms,
            metadata=dict(metadata),
        )
        _put_job_info(submission_id, info)
        return info
    except Exception as exc:  # noqa: BLE001 - a private call's failure: the link says "not found", step runs
        _fell_back(
            "recording the driver in Ray's job table",
            exc,
            "the driver is missing from the dashboard's job list (its task pages show no job)",
        )
        return None


def update_driver_job(submission_id: str, info: Any, *, status: str, message: str, end_ms: int | None) -> None:
    """Update a record of :func:`record_driver_job` (its status, message; ``end_ms`` when it ended)."""
    try:
        from ray.dashboard.modules.job.common import JobStatus

        info.status = JobStatus(status)
        info.message = message
        info.end_time = end_ms
        _put_job_info(submission_id, info)
    except Exception as exc:  # noqa: BLE001 - a private call: the record keeps its earlier state
        _fell_back(
            "updating the driver's job record",
            exc,
            "the dashboard shows its earlier state (RUNNING, or the command line)",
        )


def _put_job_info(submission_id: str, info: Any) -> None:
    from ray._private import ray_constants
    from ray.dashboard.modules.job.common import JobInfoStorageClient
    from ray.experimental.internal_kv import _internal_kv_put

    key = JobInfoStorageClient.JOB_DATA_KEY.format(job_id=submission_id)
    _internal_kv_put(key, json.dumps(info.to_json()), overwrite=True, namespace=ray_constants.KV_NAMESPACE_JOB)


def autoscaler_node_types() -> list[dict[str, float]] | None:
    """Resources of the node types Ray's v2 autoscaler may add (published in the GCS); None when
    there is no such autoscaler (or Ray's internals refused: see the table above)."""
    try:
        import ray._private.state as ray_state

        config = ray_state.state.get_cluster_config()
    except Exception as exc:  # noqa: BLE001 - a private call's failure: check the live nodes only
        _fell_back(
            "reading the autoscaler's node types",
            exc,
            "the resource check sees live nodes only (MARIN_RAY_AUTOSCALER=1 skips it)",
        )
        return None
    if config is None:
        return None
    return [dict(group.resources) for group in config.node_group_configs if group.max_count != 0]


def configure_client_builder(builder: Any, *, log_to_driver: bool, metadata: dict[str, str] | None) -> Any:
    """Give a Ray Client connection builder (``ray.client(address)``) the job's ``metadata`` and the
    ``log_to_driver`` switch: the builder has no public setter for either (``ray.init``'s
    ``job_config`` would be sent to the server as JSON and fail)."""
    try:
        if not log_to_driver:
            builder._init_args(log_to_driver=False)
        if metadata:
            builder._job_config.metadata.update(metadata)
    except (AttributeError, TypeError) as exc:
        _fell_back(
            "configuring the Ray Client connection",
            exc,
            "the driver's job has no submission id (links name Ray's job id) and worker output reaches its console",
        )
    return builder
