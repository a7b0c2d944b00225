"""Connect a process to Ray: an address given or in ``$RAY_ADDRESS``, else the embedded head.

No Dagster import: the step engine calls :func:`ensure_ray` directly, and the Dagster ``RayResource``
(``marin_resources.dagster_resources``) makes its config the process default
(:func:`set_default_config`). Connections through Ray Client are retried (a busy head's client
server can fail to start); a driver of its own records itself as a Ray job for the dashboard links
(:mod:`marin_resources.ray_jobs`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

from marin_resources import ray_internals
from marin_resources.ray_config import RayClusterConfig
from marin_resources.ray_head import configure_token_auth, embedded_token_path, start_embedded_head, use_embedded_head
from marin_resources.ray_jobs import (
    DASHBOARD_URL_ENV,
    DRIVER_MARK_KEY,
    JOBS_API_DRIVER_ENV,
    SUBMISSION_ID_KEY,
    new_submission_id,
    register_driver_job,
)

logger = logging.getLogger(__name__)


_default_config: RayClusterConfig | None = None
STEPS_ON_RAY_ENV = "MARIN_STEPS_ON_RAY"


def set_default_config(config: RayClusterConfig | None) -> None:
    """Make ``config`` what :func:`ensure_ray` uses when called without one in this process.

    The Dagster ``RayResource`` sets it so that the step engine's plain ``ensure_ray()`` honours the
    resource's address/num_cpus/namespace without the engine knowing about Dagster.
    """
    global _default_config
    _default_config = config


def get_default_config() -> RayClusterConfig:
    """The config :func:`ensure_ray` uses when called without one."""
    return _default_config or RayClusterConfig()


def resolve_address(config: RayClusterConfig) -> str:
    """The address this process should connect to (starting the embedded head if needed)."""
    if config.address:
        return config.address
    if os.environ.get("RAY_ADDRESS"):
        return os.environ["RAY_ADDRESS"]
    return start_embedded_head(config)


def steps_on_ray() -> bool:
    """Whether every step runs as a Ray task rather than in the calling (Dagster run) process.

    ``$MARIN_STEPS_ON_RAY`` (``1``/``0``) decides when set. Otherwise: yes when this process reaches
    Ray through Ray Client (``ray://``). Such a driver is a pod -- or a Dagster run process -- with no
    Ray node of its own, so computing a step in it would put the heavy work (tokenize, train, eval)
    next to the webserver instead of on the cluster's worker nodes, and libraries that drive Ray
    themselves (Levanter's cache builder) would push all their traffic through the client proxy.
    """
    value = os.environ.get(STEPS_ON_RAY_ENV, "").strip().lower()
    if value:
        return value in {"1", "true", "yes"}
    address = get_default_config().address or os.environ.get("RAY_ADDRESS") or ""
    return address.startswith("ray://")


def in_ray_worker() -> bool:
    """True inside a Ray task or actor (not in a driver, not in a Ray Client driver); never imports
    Ray to find out. The one test of it in the project (public API: the runtime context's worker)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False
    worker = getattr(ray.get_runtime_context(), "worker", None)  # absent on a Ray Client driver
    return worker is not None and worker.mode == ray.WORKER_MODE


_INIT_LOCK = threading.Lock()
CLIENT_CONNECT_ATTEMPTS = 3


def _connect(address: str, namespace: str, runtime_env: dict[str, Any] | None, metadata: dict[str, str] | None) -> None:
    """``ray.init`` with the job's ``metadata`` (its submission id) in the job config.

    Ray Client (``ray://``) takes the job config from its connection builder only -- a ``job_config``
    given to ``ray.init`` would be sent to the server as a JSON keyword and fail -- so that path
    builds the connection as ``ray.init`` does and puts the metadata on the builder's job config.
    """
    import ray

    # Worker output in the driver's terminal; MARIN_RAY_LOG_TO_DRIVER=0 (the quickstart without
    # -v) keeps it in Ray's log files only.
    log_to_driver = os.environ.get("MARIN_RAY_LOG_TO_DRIVER", "1") != "0"
    if address.startswith("ray://"):
        builder = ray.client(address, _deprecation_warn_enabled=False).namespace(namespace)
        if runtime_env:
            builder = builder.env(runtime_env)
        ray_internals.configure_client_builder(builder, log_to_driver=log_to_driver, metadata=metadata)
        builder.connect()
        return
    from ray.job_config import JobConfig

    ray.init(
        address=address,
        namespace=namespace,
        runtime_env=runtime_env,
        job_config=JobConfig(metadata=dict(metadata)) if metadata else None,
        log_to_driver=log_to_driver,
        ignore_reinit_error=True,
    )


def _warn_about_job_secrets(runtime_env: dict[str, Any]) -> None:
    """A driver's *job* runtime_env is written by Ray, values and all, into runtime_env_agent.log:
    unlike a task's, its secret variables cannot travel another way. Say so (names only)."""
    from marin_resources.runtime_env import split_secret_env_vars

    _, secrets = split_secret_env_vars(runtime_env)
    if secrets:
        logger.warning(
            "the Ray job runtime_env holds %s: Ray writes a job's runtime_env, values included, into its "
            "runtime_env_agent.log; give a step its secrets in its resources' runtime_env (they travel "
            "with the task, not through Ray's logs) or as EnvSecret config values",
            ", ".join(sorted(secrets)),
        )


def _disconnect_after_failed_connect(address: str) -> None:
    import ray

    try:
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - a half-made connection: the retry makes a new one
        logger.warning("cleaning up the failed connection to %s: %s (retrying all the same)", address, exc)


def ensure_ray(config: RayClusterConfig | None = None) -> dict[str, float]:
    """Connect this process to Ray (once) and return the cluster's resources."""
    import ray

    config = config or get_default_config()
    # Steps run in threads (the executor's max_concurrent): connect once, not once per thread.
    with _INIT_LOCK:
        if not ray.is_initialized():
            embedded = not (config.address or os.environ.get("RAY_ADDRESS"))
            if embedded:
                address = start_embedded_head(config)
                use_embedded_head(embedded_token_path(config.temp_dir))
            else:
                if configure_token_auth():
                    # Ray read its config when it was imported: make it see the auth mode now.
                    ray_internals.reload_client_settings(loopback_only=False)
                address = resolve_address(config)
            runtime_env = dict(config.runtime_env or {})
            driver_metadata = None
            if not embedded and not os.environ.get(JOBS_API_DRIVER_ENV):
                # A driver of its own (a Dagster run's step process, executor_main): give its job a
                # submission id unique across restarts for the dashboard links (ray_links). A job of
                # the Jobs API (ray_run) already has one.
                driver_metadata = {SUBMISSION_ID_KEY: new_submission_id(), DRIVER_MARK_KEY: "ray-client"}
            if embedded:
                # The embedded head's workers have a minimal environment: this run's settings
                # (JAX platform, offline flags, emulator hosts -- no secrets) travel with its job.
                from marin_resources.runtime_env import passthrough_env_vars

                runtime_env["env_vars"] = {**passthrough_env_vars(), **runtime_env.get("env_vars", {})}
            elif os.environ.get(DASHBOARD_URL_ENV):
                # The tasks build their dashboard links (recording_placement) from the driver's URL.
                env_vars = {DASHBOARD_URL_ENV: os.environ[DASHBOARD_URL_ENV], **runtime_env.get("env_vars", {})}
                runtime_env["env_vars"] = env_vars
            _warn_about_job_secrets(runtime_env)
            start = time.monotonic()
            attempts = CLIENT_CONNECT_ATTEMPTS if address.startswith("ray://") else 1
            for attempt in range(1, attempts + 1):
                try:
                    _connect(address, config.namespace, runtime_env or None, driver_metadata)
                    break
                except (ConnectionError, RuntimeError) as exc:
                    # The Ray Client proxy starts one server process per client; on a busy head
                    # that start can time out ("Starting Ray client server failed"). Try again.
                    if attempt == attempts:
                        raise
                    logger.warning("connecting to %s failed (attempt %d): %s; retrying", address, attempt, exc)
                    _disconnect_after_failed_connect(address)
                    time.sleep(2.0 * attempt)
            if driver_metadata is not None:
                register_driver_job(driver_metadata)
            logger.info("connected to Ray at %s in %.1fs", address, time.monotonic() - start)
    return dict(ray.cluster_resources())
