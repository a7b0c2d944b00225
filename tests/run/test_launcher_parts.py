"""The launcher's parts that need no cluster: secret env shipping and scrubbing, auth, step groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from marin_assets.run import ray_run
from marin_assets.run.job_entry import ENV_MODULE_VAR

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_job_entry_sets_the_env_and_scrubs_it_from_the_output(tmp_path):
    shipped = {"MY_TOKEN": "tok-123456", "OTHER": "visible?", "MARIN_PREFIX": "/data/marin"}
    module_dir = ray_run.write_env_module(shipped, str(tmp_path))
    assert oct(os.stat(Path(module_dir, "env.json")).st_mode & 0o777) == "0o600"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO_ROOT}", ENV_MODULE_VAR: Path(module_dir).name}
    script = "import os, sys; e = os.environ; print('token', e['MY_TOKEN'], e['OTHER'], e['MARIN_PREFIX']); sys.exit(4)"
    result = subprocess.run(
        [sys.executable, "-m", "marin_assets.run.job_entry", "--", sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 4  # the command's status passes through
    assert result.stdout.strip() == "token *** *** /data/marin"  # a prefix is configuration, not a secret


def test_auth_header_from_token_file_and_disabled_mode(tmp_path, monkeypatch):
    token = tmp_path / "auth_token"
    token.write_text("abc123\n")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert ray_run.auth_headers() == {"Authorization": "Bearer abc123"}
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert ray_run.auth_headers() == {}


def test_default_address_prefers_the_jobs_api(monkeypatch):
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # a GCS address is no Jobs API URL
    assert ray_run.default_address() == ray_run.DEFAULT_ADDRESS
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    assert ray_run.default_address() == "http://head:8265"


def test_listed_job_hides_env_values():
    info = SimpleNamespace(
        submission_id="raysubmit_1",
        status="JobStatus.RUNNING",
        entrypoint="python x.py",
        runtime_env={"env_vars": {"WANDB_API_KEY": "k-999", "MARIN_JOB_ENV_MODULE": "m"}, "working_dir": "gcs://p"},
        metadata={},
    )
    shown = json.dumps(ray_run.redact_job(info))
    assert "k-999" not in shown and "WANDB_API_KEY" in shown and '"RUNNING"' in shown


def test_step_groups_of_an_experiment_come_from_its_steps():
    groups = ray_run.step_dependency_groups(["python", "-m", "marin_assets.experiments.curation"], str(REPO_ROOT))
    assert groups == ["curation"]
    assert ray_run.step_dependency_groups(["bash", "-c", "true"], str(REPO_ROOT)) == []


def test_runtime_env_has_working_dir_excludes_and_env_module(tmp_path):
    module_dir = ray_run.write_env_module({"K": "value-xyz-77"}, str(tmp_path))
    env = ray_run.build_runtime_env(str(REPO_ROOT), ["curation"], module_dir)
    assert env["working_dir"] == str(REPO_ROOT) and ".venv" in env["excludes"]
    assert env["py_modules"] == [module_dir] and env["env_vars"] == {ENV_MODULE_VAR: Path(module_dir).name}
    assert "value-xyz-77" not in json.dumps(env)
    # Installed requirements are not reinstalled on the cluster (same image).
    assert "pip" not in env


def test_command_line_needs_a_command_or_a_subcommand(capsys):
    with pytest.raises(SystemExit):
        ray_run.main(["--no_wait"])
    assert "after '--'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ray_run.main(["logs"])


def test_options_may_follow_or_precede_the_job_id():
    for argv in (["logs", "--follow", "J1"], ["logs", "J1", "--follow"], ["--follow", "logs", "J1"]):
        args, command = ray_run.parse_command_line(argv)
        assert (args.action, args.follow, command) == (["logs", "J1"], True, []), argv
    args, command = ray_run.parse_command_line(["stop", "--no_wait", "J2", "--address", "http://h:8265"])
    assert (args.action, args.no_wait, args.address) == (["stop", "J2"], True, "http://h:8265")
    args, command = ray_run.parse_command_line(["-e", "K", "V", "--no_wait", "--", "python", "x.py", "--dry_run"])
    assert (args.env, args.no_wait, command) == ([["K", "V"]], True, ["python", "x.py", "--dry_run"])
