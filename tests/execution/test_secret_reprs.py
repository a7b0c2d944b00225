"""Secrets inside versioned dataclasses (their repr enters the version, as in Marin) and in the dry
run's explanation of why a step runs again: never written down, never printed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from marin_assets.execution import ExecutorStep, StepGraph, this_output_path, versioned
from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.runner import run_steps
from marin_assets.execution.secrets import redact_secrets


@dataclass(frozen=True)
class Tracker:
    project: str
    api_key: str


@dataclass(frozen=True)
class TrackedConfig:
    output_path: str
    tracker: Tracker
    api_key: str = ""


def write_marker(config: TrackedConfig) -> None:
    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    Path(config.output_path, "done").write_text("ok")


def _step(key: str) -> ExecutorStep:
    return ExecutorStep(
        name="secrets/tracked",
        fn=write_marker,
        config=TrackedConfig(this_output_path(), tracker=versioned(Tracker("proj", key)), api_key=versioned(key)),
    )


def test_redaction_reaches_fields_inside_a_versioned_dataclass_repr():
    version = {"config": {"tracker": "Tracker(project='proj', api_key='sk-REPRSECRET1')", "note": "token=5"}}
    assert redact_secrets(version) == {
        "config": {"tracker": "Tracker(project='proj', api_key='***')", "note": "token=5"}
    }
    assert redact_secrets('Outer(inner=Inner(password="pw-Q1\\"x"), n=1)') == "Outer(inner=Inner(password='***'), n=1)"
    resources = "CpuOnlyConfig(num_cpus=1, runtime_env={'env_vars': {'WANDB_API_KEY': 'wb-1234', 'MODE': 'x'}})"
    # An environment is recorded by variable name only, a neutral name's value included.
    expected = resources.replace("wb-1234", "***").replace("'x'", "'***'")
    assert redact_secrets({"resources": resources})["resources"] == expected


def test_secret_in_a_versioned_dataclass_stays_out_of_the_prefix_and_the_dry_run(prefix, capsys):
    first = _step("sk-REPRSECRET1")
    run_steps([first], prefix)
    written = b"".join(p.read_bytes() for p in Path(prefix).rglob("*") if p.is_file())
    assert b"REPRSECRET1" not in written
    out = StepGraph([first], prefix).resolved(first).output_path
    assert json.loads(Path(out, ".executor_info").read_text())["version"]["config"]["tracker"].endswith(
        "api_key='***')"
    )

    rotated = _step("sk-REPRSECRET2")  # a new key: a new version, explained without either value
    text = format_plan(plan(StepGraph([rotated], prefix)))
    assert "run" in text and "REPRSECRET" not in text, text


@dataclass(frozen=True)
class EchoConfig:
    output_path: str
    wandb: object


def echo_secret(config: EchoConfig) -> dict:
    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    return {"note": f"logged in with {config.wandb}", "rows": 3}


def test_a_secret_echoed_in_returned_metadata_is_scrubbed(prefix, monkeypatch):
    from marin_assets.execution.secrets import secret_from_env

    monkeypatch.setenv("AUDIT_WANDB_KEY", "wb-ECHOEDSECRET9")
    step = ExecutorStep(
        name="secrets/echo", fn=echo_secret, config=EchoConfig(this_output_path(), secret_from_env("AUDIT_WANDB_KEY"))
    )
    report = run_steps([step], prefix)
    (outcome,) = report.by_action("ran")
    assert "ECHOEDSECRET9" not in json.dumps(outcome.metadata) and outcome.metadata["rows"] == 3
    written = b"".join(p.read_bytes() for p in Path(prefix).rglob("*") if p.is_file())
    assert b"ECHOEDSECRET9" not in written and b"logged in with ***" in written


def leak_environment(config: EchoConfig) -> dict:
    import os

    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    if config.wandb == "fail":
        raise RuntimeError(f"could not authenticate with {os.environ['AUDIT_SECRET_ACCESS_KEY']}")
    return {"env": os.environ["AUDIT_SECRET_ACCESS_KEY"]}


def test_credentials_in_the_runners_environment_are_scrubbed_from_errors_and_metadata(prefix, monkeypatch):
    from marin_assets.execution import ExecutorError

    monkeypatch.setenv("AUDIT_SECRET_ACCESS_KEY", "aws-ENVCREDENTIAL-42")
    ok = ExecutorStep(name="secrets/env_ok", fn=leak_environment, config=EchoConfig(this_output_path(), "ok"))
    bad = ExecutorStep(name="secrets/env_bad", fn=leak_environment, config=EchoConfig(this_output_path(), "fail"))
    run_steps([ok], prefix)
    try:
        run_steps([bad], prefix)
    except ExecutorError as exc:
        assert "ENVCREDENTIAL" not in str(exc)
    written = b"".join(p.read_bytes() for p in Path(prefix).rglob("*") if p.is_file())
    assert b"could not authenticate with ***" in written and b"ENVCREDENTIAL" not in written
