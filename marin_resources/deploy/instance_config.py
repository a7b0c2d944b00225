"""The Dagster instance (``dagster.yaml``) that ``k8s/dagster-values.yaml`` describes.

The Dagster Helm chart renders its values into an instance ConfigMap; the local topology must run
with the same instance, so this module derives it from the same values file instead of keeping a
second copy that could drift: Postgres run/event/schedule storage (password from the environment
variable the chart fills from its Secret), the daemon scheduler, the queued run coordinator with its
limits, run monitoring, run retries, compute logs in the bucket, retention and telemetry (the mapping follows the
chart's ``configmap-instance.yaml`` and ``helpers/instance/_postgresql.tpl``; chart defaults our
values do not set are not mirrored, so the values set what matters explicitly). The one deliberate difference is the
run launcher: ``DefaultRunLauncher`` (a run is a subprocess of the code server) stands in for the
``K8sRunLauncher`` (a run is a pod), because there is no Kubernetes here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

# The environment variable the chart's pods read the Postgres password from (its Secret's value).
PASSWORD_ENV = "DAGSTER_PG_PASSWORD"
DEFAULT_VALUES = os.path.join(os.path.dirname(__file__), "..", "..", "k8s", "dagster-values.yaml")


@dataclass(frozen=True)
class PostgresEndpoint:
    """Where the local Postgres listens (the chart's ``postgresqlHost``/``service.port``)."""

    host: str
    port: int


def load_values(path: str | None = None) -> dict[str, Any]:
    """The Helm values (``k8s/dagster-values.yaml`` by default)."""
    with open(path or DEFAULT_VALUES) as handle:
        return yaml.safe_load(handle)


def _postgres_db(values: Mapping[str, Any], endpoint: PostgresEndpoint) -> dict[str, Any]:
    pg = values["postgresql"]
    db: dict[str, Any] = {
        "username": pg["postgresqlUsername"],
        "password": {"env": PASSWORD_ENV},
        "hostname": endpoint.host,
        "db_name": pg["postgresqlDatabase"],
        "port": endpoint.port,
        "params": dict(pg.get("postgresqlParams") or {}),
    }
    if pg.get("postgresqlScheme"):
        db["scheme"] = pg["postgresqlScheme"]
    return db


def _run_coordinator(values: Mapping[str, Any]) -> dict[str, Any]:
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    if not coordinator.get("enabled") or coordinator.get("type") != "QueuedRunCoordinator":
        raise ValueError("k8s/dagster-values.yaml: expected dagsterDaemon.runCoordinator QueuedRunCoordinator")
    queued = coordinator.get("config", {}).get("queuedRunCoordinator", {})
    config: dict[str, Any] = {}
    if "maxConcurrentRuns" in queued:
        config["max_concurrent_runs"] = int(queued["maxConcurrentRuns"])
    if "tagConcurrencyLimits" in queued:
        config["tag_concurrency_limits"] = [dict(item) for item in queued["tagConcurrencyLimits"]]
    if "dequeueIntervalSeconds" in queued:
        config["dequeue_interval_seconds"] = int(queued["dequeueIntervalSeconds"])
    return {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator", "config": config}


def _compute_logs(values: Mapping[str, Any], bucket: str) -> dict[str, Any]:
    logs = values["computeLogManager"]
    if logs.get("type") != "GCSComputeLogManager":
        raise ValueError("k8s/dagster-values.yaml: expected computeLogManager GCSComputeLogManager")
    gcs = dict(logs["config"]["gcsComputeLogManager"])
    return {
        "module": "dagster_gcp.gcs.compute_log_manager",
        "class": "GCSComputeLogManager",
        "config": {"bucket": bucket, "prefix": gcs.get("prefix", "dagster")},
    }


def instance_config(values: Mapping[str, Any], postgres: PostgresEndpoint, bucket: str) -> dict[str, Any]:
    """The ``dagster.yaml`` content for ``values`` with a local Postgres and bucket."""
    db = _postgres_db(values, postgres)
    # Module and class names exactly as the chart's configmap-instance.yaml writes them.
    storage = {
        kind: {"module": module, "class": cls, "config": {"postgres_db": dict(db)}}
        for kind, module, cls in (
            ("run_storage", "dagster_postgres.run_storage", "PostgresRunStorage"),
            ("event_log_storage", "dagster_postgres.event_log", "PostgresEventLogStorage"),
            ("schedule_storage", "dagster_postgres.schedule_storage", "PostgresScheduleStorage"),
        )
    }
    config: dict[str, Any] = {
        **storage,
        "scheduler": {"module": "dagster._core.scheduler", "class": "DagsterDaemonScheduler"},
        "run_coordinator": _run_coordinator(values),
        # The one stand-in: runs are subprocesses of the code server instead of K8sRunLauncher pods.
        "run_launcher": {"module": "dagster._core.launcher", "class": "DefaultRunLauncher"},
        "compute_logs": _compute_logs(values, bucket),
        "telemetry": {"enabled": bool(values.get("telemetry", {}).get("enabled", False))},
    }
    monitoring = values["dagsterDaemon"].get("runMonitoring", {})
    if monitoring.get("enabled"):
        config["run_monitoring"] = {
            "enabled": True,
            "start_timeout_seconds": monitoring["startTimeoutSeconds"],
            "poll_interval_seconds": monitoring["pollIntervalSeconds"],
            "free_slots_after_run_end_seconds": monitoring["freeSlotsAfterRunEndSeconds"],
        }
    retries = values["dagsterDaemon"].get("runRetries", {})
    if retries.get("enabled"):
        # What the chart writes as run_retries: the daemon re-executes a run that failed without
        # a step failing (its worker was killed, e.g. by a code-server restart) from failure.
        config["run_retries"] = {
            "enabled": True,
            "max_retries": int(retries.get("maxRetries", 0)),
            "retry_on_asset_or_op_failure": bool(retries.get("retryOnAssetOrOpFailure", True)),
        }
    retention = values.get("retention", {})
    if retention.get("enabled"):
        config["retention"] = {
            kind: {"purge_after_days": retention[kind]["purgeAfterDays"]}
            for kind in ("schedule", "sensor")
            if kind in retention
        }
    return config


def user_code_env_names(values: Mapping[str, Any]) -> list[str]:
    """Names of the environment variables the Helm values give the code server and run pods."""
    names = [item["name"] for item in values["dagster-user-deployments"]["deployments"][0].get("env", [])]
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    names += [item.split("=", 1)[0] for item in launcher.get("envVars", [])]
    return sorted(set(names))


def write_instance_config(dagster_home: str, config: Mapping[str, Any]) -> str:
    """Write ``<dagster_home>/dagster.yaml``; returns its path."""
    os.makedirs(dagster_home, exist_ok=True)
    path = os.path.join(dagster_home, "dagster.yaml")
    with open(path, "w") as handle:
        handle.write("# Generated by marin_resources.deploy from k8s/dagster-values.yaml; do not edit.\n")
        yaml.safe_dump(dict(config), handle, sort_keys=False)
    return path
