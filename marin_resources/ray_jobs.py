"""Where a step ran on Ray, links to it in the dashboard, and the job records behind those links.

No Dagster import. A step launched on Ray is wrapped by :func:`recording_placement`: its metadata
records the node, resources, Ray job, task and worker (``marin/ran_on``), the nodes its shard tasks
ran on (``shard_nodes``, see :func:`collecting_shard_nodes`) and, given the dashboard's
URL (``$MARIN_RAY_DASHBOARD_URL``), links to the job, task and worker log (``marin/ray_*``). Jobs are
named by a submission id unique across cluster restarts; a driver connected by ``ensure_ray`` records
itself as a job under such an id (:func:`register_driver_job`).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from marin_resources import ray_internals

logger = logging.getLogger(__name__)

PLACEMENT_KEY = "marin/ran_on"
# In ``marin/ran_on``: Ray node id -> how many of the step's shard tasks ran there.
SHARD_NODES_KEY = "shard_nodes"
DASHBOARD_URL_ENV = "MARIN_RAY_DASHBOARD_URL"
# One link, to the task's page (its state, its job, its logs). The dashboard's job page and log viewer
# say "Job Query Error" / "Failed to load" for a job or node of an earlier cluster (after a restart);
# the task page says the task is not found. The ids behind the page are in marin/ran_on as text.
RAY_LINK_KEYS = ("marin/ray_task",)
# execution.metadata's marker of a typed value (not imported: marin_resources never imports
# marin_assets); the Dagster bridge turns {TYPE_KEY: "url", "value": u} into MetadataValue.url(u).
_METADATA_TYPE_KEY = "__marin_metadata_type__"


# Ray's metadata key of a Jobs API job's submission id (the Jobs API's own job records use it).
SUBMISSION_ID_KEY = "job_submission_id"
# Metadata that marks a job as a Ray Client driver registered by ensure_ray (ray_run list hides them).
DRIVER_MARK_KEY = "marin_driver"


def job_submission_id() -> str | None:
    """The submission id of the calling process's Ray job: set for jobs of the Jobs API (``ray_run``)
    and for the drivers :func:`ensure_ray` registers; None otherwise (e.g. ``dagster dev``'s embedded
    cluster). Unlike Ray's job id (``01000000``, ``02000000``, ... again after every cluster start),
    it is unique across restarts."""
    return ray_internals.current_job_metadata().get(SUBMISSION_ID_KEY) or None


def ray_placement() -> dict[str, Any]:
    """Where the calling Ray task or actor runs: node id and IP, host, pid, assigned resources, and
    the Ray job (id and submission id), task and worker ids with the worker's log file (in the
    node's Ray log folder)."""
    import socket

    import ray

    context = ray.get_runtime_context()
    job_id, worker_id = context.get_job_id(), context.get_worker_id()
    return {
        "ray_node_id": context.get_node_id(),
        "ray_node_ip": ray.util.get_node_ip_address(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "resources": {k: float(v) for k, v in sorted(context.get_assigned_resources().items())},
        "ray_job_id": job_id,
        "ray_job_submission_id": job_submission_id(),
        "ray_task_id": context.get_task_id(),
        "ray_worker_id": worker_id,
        "ray_worker_log": f"worker-{worker_id}-{job_id}-{os.getpid()}.out",
    }


def ray_links(placement: dict[str, Any], base_url: str | None = None) -> dict[str, Any]:
    """The dashboard link of a :func:`ray_placement` (URL-typed step metadata), given the dashboard's
    URL as the person's browser reaches it (``$MARIN_RAY_DASHBOARD_URL``); none when it is unset.

    ``marin/ray_task``: the task's page -- its state, its job and its logs while the cluster lives;
    after a restart of the cluster, a page that says the task is not found. (No link to the job page
    or the log viewer: for an earlier cluster's job or node they say "Job Query Error" / "Failed to
    load".) The job is named by its submission id when it has one (unique across restarts: the
    link never opens the new cluster's job that reuses the old job id).
    """
    from urllib.parse import quote

    base = (base_url if base_url is not None else os.environ.get(DASHBOARD_URL_ENV, "")).rstrip("/")
    job = placement.get("ray_job_submission_id") or placement.get("ray_job_id")
    task = placement.get("ray_task_id")
    if not base or not job or not task:
        return {}
    return {"marin/ray_task": {_METADATA_TYPE_KEY: "url", "value": f"{base}/#/jobs/{quote(job)}/tasks/{quote(task)}"}}


TASK_NAME_ATTR = "ray_task_name"
F = TypeVar("F", bound=Callable[..., Any])


def name_task(fn: F, name: str) -> F:
    """Mark ``fn`` so that the Ray task running it is named ``name`` (the step's name) in the
    dashboard and ``ray list tasks``, instead of the name of the innermost wrapper."""
    setattr(fn, TASK_NAME_ATTR, name)
    return fn


def task_name_of(fn: Callable[..., Any]) -> str | None:
    """The task name :func:`name_task` gave ``fn`` (None: Ray names the task after the function)."""
    return getattr(fn, TASK_NAME_ATTR, None)


# The shard nodes of the step running in this thread (None: nobody collects them).
_SHARD_NODES: contextvars.ContextVar[Counter[str] | None] = contextvars.ContextVar("marin_shard_nodes", default=None)


@contextlib.contextmanager
def collecting_shard_nodes() -> Iterator[Counter[str]]:
    """Count, by Ray node id, the shard tasks that :func:`record_shard_nodes` reports inside the block
    (in this thread: a stage maps its shards from the step's own thread)."""
    nodes: Counter[str] = Counter()
    token = _SHARD_NODES.set(nodes)
    try:
        yield nodes
    finally:
        _SHARD_NODES.reset(token)


def record_shard_nodes(node_ids: Iterable[str]) -> None:
    """Report the Ray nodes some shard tasks ran on (one id per task) to the step collecting them."""
    nodes = _SHARD_NODES.get()
    if nodes is not None:
        nodes.update(node_ids)


def returning_node(fn: Callable[..., Any]) -> Callable[..., tuple[Any, str]]:
    """``fn`` as a Ray task that also returns the id of the node it ran on: ``(fn(*args), node id)``."""

    def call(*args: Any) -> tuple[Any, str]:
        import ray

        return fn(*args), ray.get_runtime_context().get_node_id()

    # The dashboard names the task after the function, not after this wrapper.
    call.__name__ = getattr(fn, "__name__", "shard")
    call.__qualname__ = getattr(fn, "__qualname__", call.__name__)
    return call


def with_shard_nodes(placement: dict[str, Any], nodes: Counter[str]) -> dict[str, Any]:
    """``placement`` with :data:`SHARD_NODES_KEY` (node id -> shard tasks) when shards ran on Ray."""
    return {**placement, SHARD_NODES_KEY: dict(sorted(nodes.items()))} if nodes else placement


def recording_placement(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap a step function so that its metadata records where it ran (:func:`ray_placement`), where
    its shard tasks ran (:func:`collecting_shard_nodes`) and links to its Ray task (:func:`ray_links`).

    The wrapper is a plain function (``ray.remote`` and Levanter's TPU launcher need one); its result
    is the step's metadata dict with :data:`PLACEMENT_KEY` (and the links) added (a None result
    becomes that alone).
    """

    def call(config: Any) -> Any:
        with collecting_shard_nodes() as shard_nodes:
            result = fn(config)
        if result is not None and not isinstance(result, dict):
            return result
        placement = with_shard_nodes(ray_placement(), shard_nodes)
        return {**(result or {}), PLACEMENT_KEY: placement, **ray_links(placement)}

    call.__name__ = getattr(fn, "__name__", "step")
    return call


# The Jobs API's supervisor gives its driver the job's config (submission id included) in this variable.
JOBS_API_DRIVER_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def new_submission_id() -> str:
    """A submission id for a driver: ``marin-<UTC time>-<random>``, unique across cluster restarts."""
    import datetime
    import secrets

    return f"marin-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


_DRIVER_MESSAGE = "a driver connected through Ray Client (marin): the tasks of its steps"
# What the dashboard's job list says this driver runs: set by the layer that knows (the Dagster
# bridge names the run, see describe_driver); else the command line.
_DRIVER_DESCRIPTION: dict[str, str] = {}
# This process's registered driver job: (submission id, record), to rename it or mark it finished.
_REGISTERED: list[tuple[str, Any]] = []


def describe_driver(entrypoint: str, message: str | None = None) -> None:
    """Say what this driver runs (e.g. ``dagster run 1a2b3c4d (__ASSET_JOB)``), as the dashboard's
    job list and job page show it; renames an already registered driver job too."""
    _DRIVER_DESCRIPTION["entrypoint"] = entrypoint[:300]
    if message:
        _DRIVER_DESCRIPTION["message"] = message
    if _REGISTERED:
        submission_id, info = _REGISTERED[0]
        info.entrypoint = _DRIVER_DESCRIPTION["entrypoint"]
        info.message = _DRIVER_DESCRIPTION.get("message", _DRIVER_MESSAGE)
        ray_internals.update_driver_job(submission_id, info, status="RUNNING", message=info.message, end_ms=None)


def _driver_entrypoint() -> str:
    """What this driver runs, as the dashboard's job list shows it: :func:`describe_driver`'s words,
    else the command line, shortened."""
    if _DRIVER_DESCRIPTION.get("entrypoint"):
        return _DRIVER_DESCRIPTION["entrypoint"]
    return " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])[:300] or "python"


def register_driver_job(metadata: dict[str, str]) -> None:
    """Record this connected driver as a job under its submission id (``metadata``), as the Jobs API
    records the jobs it starts, so that the dashboard opens ``#/jobs/<submission id>`` and its job
    list shows it (RUNNING, then SUCCEEDED when this process exits). Best effort: a cluster that
    refuses it leaves the links saying the job is not found, and the step runs all the same
    (``ray_internals`` logs why, once).

    A driver killed without exiting stays RUNNING in the list until the dashboard restarts (Ray's
    job manager then marks it FAILED, as it does for Jobs API jobs whose supervisor is gone).
    """
    import atexit

    submission_id = metadata[SUBMISSION_ID_KEY]
    info = ray_internals.record_driver_job(
        submission_id,
        status="RUNNING",
        entrypoint=_driver_entrypoint(),
        message=_DRIVER_DESCRIPTION.get("message", _DRIVER_MESSAGE),
        metadata=dict(metadata),
        start_ms=int(time.time() * 1000),
    )
    if info is None:
        return
    _REGISTERED[:] = [(submission_id, info)]

    def finish() -> None:
        import ray

        if ray.is_initialized():  # at exit: a process that disconnected has nothing left to mark
            ray_internals.update_driver_job(
                submission_id, info, status="SUCCEEDED", message="the driver exited", end_ms=int(time.time() * 1000)
            )

    atexit.register(finish)
