"""runtime_env_for: dependency groups from the real pyproject.toml, pass-through env, secrets."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from marin_resources.runtime_env import (
    REDACTED,
    expand_dependency_groups,
    redact_runtime_env,
    requirement_satisfied,
    runtime_env_for,
)

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _groups() -> dict[str, list[str]]:
    with open(PYPROJECT, "rb") as handle:
        return tomllib.load(handle)["project"]["optional-dependencies"]


def test_empty_is_empty():
    assert runtime_env_for(None) == {}
    assert runtime_env_for([]) == {}


def test_groups_expand_from_real_pyproject():
    groups = _groups()
    name = next(g for g in groups if g != "test")
    expanded = expand_dependency_groups([name, "some-package==1.2"], PYPROJECT)
    assert expanded == [*dict.fromkeys(groups[name]), "some-package==1.2"]


def test_all_groups_expand_and_dedupe():
    groups = _groups()
    expanded = expand_dependency_groups(list(groups), PYPROJECT)
    assert expanded == list(dict.fromkeys(r for reqs in groups.values() for r in reqs))


def test_installed_requirements_are_skipped_not_others(monkeypatch):
    monkeypatch.delenv("MARIN_RAY_PIP_SKIP_INSTALLED", raising=False)
    env = runtime_env_for(["ray==2.60.0", "definitely-not-installed-pkg==0.0.1"], PYPROJECT)
    assert env["pip"] == ["definitely-not-installed-pkg==0.0.1"]
    env = runtime_env_for(["ray==2.60.0"], PYPROJECT, skip_installed=False)
    assert env["pip"] == ["ray==2.60.0"]
    monkeypatch.setenv("MARIN_RAY_PIP_SKIP_INSTALLED", "0")
    assert runtime_env_for(["ray==2.60.0"], PYPROJECT)["pip"] == ["ray==2.60.0"]


def test_requirement_satisfied():
    import ray

    assert requirement_satisfied(f"ray=={ray.__version__}")
    assert requirement_satisfied("ray[default]")
    assert not requirement_satisfied("ray<1")
    assert not requirement_satisfied("no-such-dist-xyz")
    assert requirement_satisfied('no-such-dist-xyz; sys_platform == "nonexistent"')
    assert not requirement_satisfied("git+https://example.com/x.git")


def test_env_passthrough_and_secrets(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/var/keys/sa.json")
    env = runtime_env_for(["no-such-dist-xyz"], PYPROJECT)
    assert env["env_vars"]["JAX_PLATFORMS"] == "cpu"
    assert "WANDB_API_KEY" not in env["env_vars"]
    env = runtime_env_for(["no-such-dist-xyz"], PYPROJECT, include_secrets=True, env_vars={"EXTRA": "1"})
    assert env["env_vars"]["WANDB_API_KEY"] == "s3cr3t-value"
    assert env["env_vars"]["EXTRA"] == "1"
    safe = redact_runtime_env(env)
    assert safe["env_vars"]["WANDB_API_KEY"] == REDACTED
    assert safe["env_vars"]["GOOGLE_APPLICATION_CREDENTIALS"] == REDACTED
    assert "s3cr3t-value" not in repr(safe)
    assert env["env_vars"]["WANDB_API_KEY"] == "s3cr3t-value"  # the original is untouched


def test_secrets_never_logged(monkeypatch, caplog):
    import logging

    monkeypatch.setenv("WANDB_API_KEY", "s3cr3t-value")
    with caplog.at_level(logging.DEBUG, logger="marin_resources.runtime_env"):
        runtime_env_for(["no-such-dist-xyz"], PYPROJECT, include_secrets=True)
    assert caplog.records and "s3cr3t-value" not in caplog.text


def test_self_reference_in_group(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "demo-proj"\n[project.optional-dependencies]\n'
        'a = ["alpha==1"]\nb = ["beta==2", "demo_proj[a]"]\n'
    )
    assert expand_dependency_groups(["b"], pyproject) == ["beta==2", "alpha==1"]


@pytest.mark.parametrize("entry", ["TRAIN", "Train"])
def test_group_names_normalised(entry):
    assert expand_dependency_groups([entry], PYPROJECT) == list(dict.fromkeys(_groups()["train"]))
