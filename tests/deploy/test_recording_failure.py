"""A command-line run that cannot be recorded in the Dagster instance is an error, unless --no_record."""

from __future__ import annotations

import socket

import pytest

from marin_assets.execution import executor_main
from marin_assets.execution.status import read_status
from marin_assets.experiments import hello_world
from marin_resources.deploy import instance_config


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket is closed


def _postgres_home(tmp_path, monkeypatch, scheme: str | None) -> None:
    values = instance_config.load_values()
    values["postgresql"]["postgresqlScheme"] = scheme
    config = instance_config.instance_config(values, instance_config.PostgresEndpoint("127.0.0.1", _closed_port()), "b")
    home = tmp_path / "home"
    instance_config.write_instance_config(str(home), config)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(instance_config.PASSWORD_ENV, "not-a-real-password")


@pytest.mark.parametrize("scheme", ["postgresql+psycopg2", None], ids=["postgres_down", "psycopg3_scheme"])
def test_unrecordable_run_exits_nonzero_after_the_steps_succeeded(tmp_path, monkeypatch, scheme, caplog):
    _postgres_home(tmp_path, monkeypatch, scheme)
    prefix = str(tmp_path / "prefix")
    steps = hello_world.build_steps(n=50)
    with pytest.raises(SystemExit) as exit_info:
        executor_main(steps, argv=["--prefix", prefix])
    assert exit_info.value.code == 2
    assert "could not record the run in the Dagster instance" in caplog.text
    # The steps themselves finished: a re-run is cached and only needs the instance.
    from marin_assets.execution import StepGraph

    for node in StepGraph(steps, prefix).topological():
        assert read_status(node.output_path).status == "SUCCESS"


def test_no_record_runs_without_the_instance(tmp_path, monkeypatch):
    _postgres_home(tmp_path, monkeypatch, "postgresql+psycopg2")
    report = executor_main(hello_world.build_steps(n=50), argv=["--prefix", str(tmp_path / "p"), "--no_record"])
    assert report is not None and len(report.by_action("ran")) == 2
