"""A secret env var of a step's runtime_env reaches its Ray worker (and the worker's subprocesses)
without appearing in any of Ray's own files; a plain setting still travels in the runtime_env Ray
logs (which shows that the right log was read)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_assets.execution import ExecutorStep, run_steps, this_output_path
from marin_assets.execution.status import read_metadata
from marin_resources.resource_config import CpuOnlyConfig
from marin_resources.runtime_env import split_secret_env_vars

pytestmark = pytest.mark.ray

SECRET = "s3cr3t-7f1e9c2a-value"


@dataclass(frozen=True)
class EnvProbe:
    output_path: str


def probe_env(config: EnvProbe) -> dict[str, object]:
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('PIPELINE_SERVICE_TOKEN', ''))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "token_seen": os.environ.get("PIPELINE_SERVICE_TOKEN") == SECRET,
        "child_token_seen": child.stdout.strip() == SECRET,
        "setting": os.environ.get("PIPELINE_PLAIN_SETTING"),
    }


def test_split_keeps_settings_and_moves_secret_names():
    env = {"pip": ["x"], "env_vars": {"HF_TOKEN": "t" * 10, "DB_PASSWORD": "p" * 10, "JAX_PLATFORMS": "cpu"}}
    public, secrets = split_secret_env_vars(env)
    assert public == {"pip": ["x"], "env_vars": {"JAX_PLATFORMS": "cpu"}}
    assert set(secrets) == {"HF_TOKEN", "DB_PASSWORD"}
    assert split_secret_env_vars(None) == (None, {})


@pytest.mark.timeout(180)
def test_a_secret_reaches_the_worker_but_none_of_rays_files(ray_head, ray_tmpdir, tmp_path):
    resources = CpuOnlyConfig(
        num_cpus=1,
        runtime_env={"env_vars": {"PIPELINE_SERVICE_TOKEN": SECRET, "PIPELINE_PLAIN_SETTING": "visible-setting-42"}},
    )
    step = ExecutorStep("secrets/probe", probe_env, EnvProbe(this_output_path()), resources=resources)
    report = run_steps([step], str(tmp_path))
    metadata = read_metadata(report.outcomes[0].output_path)
    assert metadata["token_seen"] and metadata["child_token_seen"], metadata
    assert metadata["setting"] == "visible-setting-42"
    assert "PIPELINE_SERVICE_TOKEN" not in os.environ  # the driver's environment is untouched
    logs = [p for p in Path(ray_tmpdir).rglob("*") if p.is_file() and not p.is_symlink()]
    leaked = [str(p) for p in logs if SECRET.encode() in p.read_bytes()]
    assert leaked == []
    agent_logs = [p for p in logs if p.name.startswith("runtime_env_agent") and p.suffix == ".log"]
    assert any(b"visible-setting-42" in p.read_bytes() for p in agent_logs), agent_logs


def test_a_secret_in_the_job_runtime_env_is_named_in_a_warning_never_its_value(caplog):
    from marin_resources.ray_connect import _warn_about_job_secrets

    _warn_about_job_secrets({"env_vars": {"WANDB_API_KEY": SECRET, "JAX_PLATFORMS": "cpu"}})
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "WANDB_API_KEY" in warnings[0] and SECRET not in warnings[0]
    caplog.clear()
    _warn_about_job_secrets({"env_vars": {"JAX_PLATFORMS": "cpu"}})
    assert not caplog.records
