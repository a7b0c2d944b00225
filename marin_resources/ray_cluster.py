"""Ray for the step engine: the names callers import, from the modules that own them.

No Dagster import here: the step engine uses these functions directly, and the Dagster
``RayResource`` (``marin_resources.dagster_resources``) wraps them. Each job lives in its own module:

* :mod:`marin_resources.ray_head` -- the embedded local head: start (once per machine and temp dir,
  closed: loopback and token), find, heal (a dead raylet or agent), stop;
* :mod:`marin_resources.ray_connect` -- connect a process: address resolution, Ray Client retries,
  ``steps_on_ray``, ``in_ray_worker``;
* :mod:`marin_resources.ray_jobs` -- where a step ran (``marin/ran_on``), dashboard links, the
  driver's job record behind them;
* :mod:`marin_resources.progress` -- progress lines of running steps, from Ray workers too;
* :mod:`marin_resources.ray_internals` -- the only use of Ray's private API, and what breaks when
  it fails.
"""

from __future__ import annotations

from marin_resources.progress import PROGRESS_LOGGER, PROGRESS_MARK, report_progress
from marin_resources.ray_connect import (
    CLIENT_CONNECT_ATTEMPTS,
    STEPS_ON_RAY_ENV,
    RayClusterConfig,
    ensure_ray,
    get_default_config,
    in_ray_worker,
    resolve_address,
    set_default_config,
    steps_on_ray,
)
from marin_resources.ray_head import (
    ADDRESS_FILE,
    HEAD_ENV_VARS,
    LOOPBACK_ENV,
    TOKEN_FILE,
    _free_port,
    configure_token_auth,
    default_temp_dir,
    embedded_token_path,
    head_environment,
    missing_daemons,
    prepare_private_ray,
    start_embedded_head,
    stop_embedded_head,
)
from marin_resources.ray_jobs import (
    _METADATA_TYPE_KEY,
    DASHBOARD_URL_ENV,
    DRIVER_MARK_KEY,
    PLACEMENT_KEY,
    RAY_LINK_KEYS,
    SHARD_NODES_KEY,
    SUBMISSION_ID_KEY,
    collecting_shard_nodes,
    describe_driver,
    job_submission_id,
    name_task,
    new_submission_id,
    ray_links,
    ray_placement,
    record_shard_nodes,
    recording_placement,
    register_driver_job,
    returning_node,
    task_name_of,
    with_shard_nodes,
)

__all__ = [
    "ADDRESS_FILE",
    "CLIENT_CONNECT_ATTEMPTS",
    "DASHBOARD_URL_ENV",
    "DRIVER_MARK_KEY",
    "HEAD_ENV_VARS",
    "LOOPBACK_ENV",
    "PLACEMENT_KEY",
    "PROGRESS_LOGGER",
    "PROGRESS_MARK",
    "RAY_LINK_KEYS",
    "SHARD_NODES_KEY",
    "STEPS_ON_RAY_ENV",
    "SUBMISSION_ID_KEY",
    "TOKEN_FILE",
    "_METADATA_TYPE_KEY",
    "RayClusterConfig",
    "_free_port",
    "collecting_shard_nodes",
    "configure_token_auth",
    "default_temp_dir",
    "describe_driver",
    "embedded_token_path",
    "ensure_ray",
    "get_default_config",
    "head_environment",
    "in_ray_worker",
    "job_submission_id",
    "missing_daemons",
    "name_task",
    "new_submission_id",
    "prepare_private_ray",
    "ray_links",
    "ray_placement",
    "record_shard_nodes",
    "recording_placement",
    "register_driver_job",
    "report_progress",
    "resolve_address",
    "returning_node",
    "set_default_config",
    "start_embedded_head",
    "steps_on_ray",
    "stop_embedded_head",
    "task_name_of",
    "with_shard_nodes",
]
