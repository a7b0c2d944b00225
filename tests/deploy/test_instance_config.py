"""The local topology's dagster.yaml is derived from the Helm values, and it is a valid instance."""

from __future__ import annotations

import os

from marin_resources.deploy import instance_config
from marin_resources.deploy.dagster_services import REPO
from marin_resources.deploy.local import topology_env


def _derive(tmp_path):
    values = instance_config.load_values()
    config = instance_config.instance_config(values, instance_config.PostgresEndpoint("127.0.0.1", 5999), "bkt")
    return values, config


def test_storage_is_postgres_with_psycopg2_and_password_from_env(tmp_path):
    values, config = _derive(tmp_path)
    for kind in ("run_storage", "event_log_storage", "schedule_storage"):
        db = config[kind]["config"]["postgres_db"]
        assert config[kind]["module"].startswith("dagster_postgres.")
        # SQLAlchemy 2.1 maps postgresql:// to psycopg 3 (not installed): the scheme must be explicit.
        assert db["scheme"] == "postgresql+psycopg2"
        assert db["password"] == {"env": instance_config.PASSWORD_ENV}
        assert (db["hostname"], db["port"]) == ("127.0.0.1", 5999)
        assert db["db_name"] == values["postgresql"]["postgresqlDatabase"]
    assert "postgresqlPassword" not in values["postgresql"]  # only the user-created Secret holds it


def test_coordinator_logs_and_the_one_stand_in_follow_the_values(tmp_path):
    values, config = _derive(tmp_path)
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    coordinator = config["run_coordinator"]
    assert coordinator["class"] == "QueuedRunCoordinator"
    assert coordinator["config"]["max_concurrent_runs"] == queued["maxConcurrentRuns"]
    assert coordinator["config"]["tag_concurrency_limits"] == queued["tagConcurrencyLimits"]
    assert {"key": "marin/curation", "limit": 1} in coordinator["config"]["tag_concurrency_limits"]
    assert coordinator["config"]["dequeue_interval_seconds"] == queued["dequeueIntervalSeconds"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert config["run_launcher"]["class"] == "DefaultRunLauncher"
    logs = config["compute_logs"]
    assert logs["class"] == "GCSComputeLogManager"
    assert logs["config"] == {
        "bucket": "bkt",
        "prefix": values["computeLogManager"]["config"]["gcsComputeLogManager"]["prefix"],
    }
    assert config["scheduler"]["class"] == "DagsterDaemonScheduler"
    assert (
        config["run_monitoring"]["start_timeout_seconds"]
        == values["dagsterDaemon"]["runMonitoring"]["startTimeoutSeconds"]
    )


def test_written_instance_config_validates_against_dagster_schema(tmp_path):
    from tests.dagster_private import validated_instance_config

    _, config = _derive(tmp_path)
    home = tmp_path / "home"
    instance_config.write_instance_config(str(home), config)
    validated = validated_instance_config(str(home))
    assert validated["run_storage"]["class"] == "PostgresRunStorage"
    assert (
        validated["run_coordinator"]["config"]["max_concurrent_runs"]
        == config["run_coordinator"]["config"]["max_concurrent_runs"]
    )
    # A run whose worker a code-server restart killed is re-executed; a step's own failure is not.
    retries = instance_config.load_values()["dagsterDaemon"]["runRetries"]
    assert validated["run_retries"] == {
        "enabled": True,
        "max_retries": retries["maxRetries"],
        "retry_on_asset_or_op_failure": False,
    }
    assert retries["maxRetries"] >= 1


def test_suggested_commands_keep_a_non_default_state_dir(tmp_path, monkeypatch):
    from marin_resources.deploy import local

    monkeypatch.delenv("MARIN_DEPLOY_STATE", raising=False)
    assert local._state_dir_flag(local.DEFAULT_STATE_DIR) == ""
    assert local._state_dir_flag(str(tmp_path / "x y")) == f" --state_dir '{tmp_path / 'x y'}'"


def test_local_processes_get_every_variable_the_helm_values_give_the_pods(tmp_path, monkeypatch):
    # What a process that used the embedded head carries: it would make `ray start` refuse the worker.
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "some-other-clusters-token")
    values = instance_config.load_values()
    ports = {"gcs": 1, "ray_client": 2, "browser": 3, "ray_dashboard": 4, "webserver": 5}
    env = topology_env(str(tmp_path), ports, "bkt", "pw")
    missing = [name for name in instance_config.user_code_env_names(values) if name not in env]
    # No autoscaler here: the feasibility check runs against the one worker node.
    assert missing == ["MARIN_RAY_AUTOSCALER"]
    # Same transport as the pods: Ray Client, and data in a gs:// bucket.
    assert env["RAY_ADDRESS"] == "ray://127.0.0.1:2"
    assert env["MARIN_PREFIX"] == "gs://bkt/marin"
    assert env["DAGSTER_HOME"] == os.path.join(str(tmp_path), "dagster_home")
    # Every asset's `marin/browser` link opens the topology's own data browser.
    assert env["MARIN_BROWSER_URL"] == "http://127.0.0.1:3"
    # The quickstart's summary names the deployed webserver, not `dagster dev`.
    assert env["MARIN_UI_URL"] == "http://127.0.0.1:5"
    # Ray's token as the pods get it (token mode; here a 0600 file instead of the Secret), the Jobs
    # API for ray_run and the dashboard for the marin/ray_* links.
    assert env["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in env
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in env
    assert env["RAY_AUTH_TOKEN_PATH"] == os.path.join(str(tmp_path), "secrets", "ray_auth_token")
    assert env["RAY_API_SERVER_ADDRESS"] == env["MARIN_RAY_DASHBOARD_URL"] == "http://127.0.0.1:4"
    # The project the location serves: this repository unless the team's repository is named, which
    # then is also importable by the Ray workers (its scripts' step functions).
    assert env["MARIN_PROJECT_ROOT"] == str(REPO) and env["PYTHONPATH"] == str(REPO)
    team = tmp_path / "team"
    env = topology_env(str(tmp_path), ports, "bkt", "pw", project_root=str(team))
    assert env["MARIN_PROJECT_ROOT"] == str(team) and env["PYTHONPATH"].split(os.pathsep) == [str(team), str(REPO)]


def test_ray_client_proxy_runs_without_grpc_fork_handlers_locally_and_on_kuberay():
    """The proxy forks a server per client; gRPC's fork handlers can kill that child before exec."""
    from pathlib import Path

    import yaml

    from marin_resources.deploy.ray_nodes import ray_head_env

    assert ray_head_env({"A": "1"}) == {"A": "1", "GRPC_ENABLE_FORK_SUPPORT": "false"}
    cluster = yaml.safe_load((Path(instance_config.DEFAULT_VALUES).parent / "raycluster.yaml").read_text())
    (head,) = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"]
    assert {"name": "GRPC_ENABLE_FORK_SUPPORT", "value": "false"} in head["env"]


def test_the_local_code_server_reloads_and_the_dashboard_port_is_fixed(monkeypatch):
    """`dagster code-server start` (reloads), not `dagster api grpc`; `reload` / `restart-code`
    commands; the dashboard on 8265 unless configured ($MARIN_RAY_DASHBOARD_PORT, --ray_dashboard_port)."""
    from marin_resources.deploy import dagster_services, local

    command = dagster_services.code_server_command(4321)
    assert command[1:3] == ["code-server", "start"] and "grpc" not in command
    assert command[command.index("-p") + 1] == "4321"
    assert command[command.index("--python-file") + 1].endswith("definitions.py")
    parser = local.build_parser()
    assert parser.parse_args(["reload"]).command == "reload"
    assert parser.parse_args(["restart-code"]).command == "restart-code"
    monkeypatch.delenv("MARIN_RAY_DASHBOARD_PORT", raising=False)
    assert local.build_parser().parse_args([]).ray_dashboard_port == 8265
    monkeypatch.setenv("MARIN_RAY_DASHBOARD_PORT", "18265")
    assert local.build_parser().parse_args([]).ray_dashboard_port == 18265
    assert local.build_parser().parse_args(["--ray_dashboard_port", "0"]).ray_dashboard_port == 0
