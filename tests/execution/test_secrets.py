"""Secrets never end up in the prefix, the Dagster instance, logs or later runs' Ray tasks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.dry_run import version_diff
from marin_assets.execution.secrets import (
    EnvSecret,
    MissingSecretError,
    redact_secrets,
    resolve_secrets,
    secret_from_env,
)
from marin_assets.execution.status import read_info, read_metadata
from tests.execution import secret_steps

REPO = Path(__file__).resolve().parents[2]

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "fake-aws-SECRET-7f3a9c",
    "WANDB_API_KEY": "fake-wandb-SECRET-51d0e2",
    "MARIN_TEST_API_TOKEN": "tok-by-reference-SECRET-c0ffee",
    "TEST_PLAIN_API_KEY": "sk-plain-SECRET-19be42",
    "TEST_VERSIONED_PASSWORD": "pw-versioned-SECRET-a4d2f1",
    "TEST_BEARER_TOKEN": "bearer-dict-SECRET-9e8d7c",
    "TEST_NESTED_CREDENTIAL": "nested-dataclass-SECRET-3b2a1f",
    "TEST_LIST_BEARER": "list-bearer-SECRET-6f5e4d",
}


def _grep_bytes(blobs: dict[str, bytes]) -> list[tuple[str, str]]:
    return [(name, key) for name, data in blobs.items() for key, value in SECRETS.items() if value.encode() in data]


def _bucket_contents(prefix: str) -> dict[str, bytes]:
    fs, root = fsspec.core.url_to_fs(prefix)
    return {path: fs.cat_file(path) for path in fs.find(root)}


def _folder_contents(folder: str | Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in Path(folder).rglob("*") if p.is_file()}


def test_secret_helpers_redact_resolve_and_version_by_name(monkeypatch):
    config = secret_steps.SecretConfig("out", api_key="sk-x", password="pw", token=secret_from_env("MY_TOKEN"))
    redacted = redact_secrets(config)
    assert redacted["api_key"] == "***" and redacted["password"] == "***"
    assert redacted["token"] == {"env": "MY_TOKEN"} and redacted["output_path"] == "out"
    assert redact_secrets({"tokenizer": "gpt2", "eos_token": "</s>", "num_tokens": 5}) == {
        "tokenizer": "gpt2",
        "eos_token": "</s>",
        "num_tokens": 5,
    }
    with pytest.raises(MissingSecretError, match=r"\$MY_TOKEN"):
        resolve_secrets(config)
    monkeypatch.setenv("MY_TOKEN", "value-1")
    assert resolve_secrets(config).token == "value-1"
    assert "value-1" not in repr(EnvSecret("MY_TOKEN"))
    # A dry run shows that a versioned secret changed, never its values.
    assert version_diff({"config": {"password": "pw-1"}}, {"config": {"password": "pw-2"}}) == [
        "~ config.password: '***' -> '***'"
    ]
    # The reference enters the version by name: rotating the secret does not change the output path.
    steps = secret_steps.config_steps()
    before = StepGraph(steps, "/tmp/x").resolved(steps[0]).hash
    monkeypatch.setenv("MARIN_TEST_API_TOKEN", "rotated")
    assert StepGraph(steps, "/tmp/x").resolved(steps[0]).hash == before


def test_secrets_masked_at_any_depth_by_name_form_and_known_value(monkeypatch):
    """Dict values, lists, tuples, nested dataclasses and dataclass reprs: secrets hidden by key
    name, by form (URL userinfo, Bearer / Basic) and by known value wherever a value was copied."""
    monkeypatch.setenv("HF_TOKEN", "hf-env-SECRET-0a1b2c")
    config = secret_steps.SecretConfig(
        "out",
        api_key="sk-plain-SECRET-19be42",
        token=secret_from_env("HF_TOKEN"),
        headers={"Authorization": "Bearer bearer-dict-SECRET", "X-Copy": "sk-plain-SECRET-19be42", "Accept": "json"},
        mirrors=(secret_steps.Mirror("https://user:pw-in-url@mirror.example/", "nested-dataclass-SECRET"),),
        extra_args=(
            "-H",
            "Authorization: Bearer list-bearer-SECRET",
            "Basic dXNlcjpwYXNzd29yZA==",
            "hf-env-SECRET-0a1b2c",
        ),
    )
    redacted = redact_secrets(config)
    text = json.dumps(redacted)
    for secret in ("sk-plain", "bearer-dict", "pw-in-url", "nested-dataclass", "list-bearer", "dXNlcj", "hf-env"):
        assert secret not in text, secret
    assert redacted["headers"] == {"Authorization": "***", "X-Copy": "***", "Accept": "json"}
    assert redacted["mirrors"] == [{"url": "https://***@mirror.example/", "credentials": "***"}]
    assert redacted["extra_args"] == ["-H", "Authorization: Bearer ***", "Basic ***", "***"]
    assert redacted["token"] == {"env": "HF_TOKEN"} and redacted["output_path"] == "out"
    # A versioned nested dataclass is stored as its repr: its secret fields are hidden there too.
    assert redact_secrets(repr(config.mirrors[0])) == "Mirror(url='https://***@mirror.example/', credentials='***')"
    assert redact_secrets("{'Cookie': 'session=abc123', 'Accept': 'json'}") == "{'Cookie': '***', 'Accept': 'json'}"
    # Ordinary text is left alone: prose, tokenizer words, short values.
    plain = {"description": "Basic tokenizer, bearer of news", "eos_token": "</s>", "tokens": 5, "note": "sk"}
    assert redact_secrets(plain) == plain


def test_no_secret_in_prefix_dagster_instance_or_logs(gcs_prefix, dagster_home):
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(REPO), "DAGSTER_HOME": dagster_home}
    env.pop("MARIN_RUN_OBSERVERS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.execution.secret_steps", "config", "--prefix", gcs_prefix],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recorded in Dagster instance" in proc.stderr
    with pytest.MonkeyPatch.context() as patch:
        for key, value in SECRETS.items():
            patch.setenv(key, value)
        steps = secret_steps.config_steps()
        out = StepGraph(steps, gcs_prefix).resolved(steps[0]).output_path
    assert read_metadata(out)["token_resolved"] is True  # the step got the secret's value
    assert read_metadata(out)["headers_arrived"] is True  # and the dict-valued one unchanged
    info = read_info(out)
    assert info["config"]["token"] == {"env": "MARIN_TEST_API_TOKEN"} and info["config"]["api_key"] == "***"
    hits = _grep_bytes(_bucket_contents(gcs_prefix))
    hits += _grep_bytes(_folder_contents(dagster_home))
    hits += _grep_bytes({"stdout": proc.stdout.encode(), "stderr": proc.stderr.encode()})
    assert hits == []


@pytest.mark.slow
@pytest.mark.ray
def test_later_runs_ray_tasks_see_no_earlier_credentials_and_auth_token_works(prefix, tmp_path):
    """Run 1 (with credentials and RAY_AUTH_TOKEN) starts the embedded head; run 2 has no credentials."""
    ray_tmp = f"/tmp/mrs-{os.getpid()}"
    base = {k: v for k, v in os.environ.items() if k not in SECRETS}
    base.update({"PYTHONPATH": str(REPO), "MARIN_RAY_TMPDIR": ray_tmp, "RAY_AUTH_TOKEN": "marin-test-cluster-token"})
    base.pop("RAY_AUTH_MODE", None)
    base.pop("RAY_ADDRESS", None)
    try:
        for run, extra in (("first", SECRETS), ("second", {})):
            proc = subprocess.run(
                [sys.executable, "-m", "tests.execution.secret_steps", "ray_env", "--prefix", prefix, "--no_record"],
                cwd=REPO,
                env={**base, **extra, "RUN_NAME": run},
                capture_output=True,
                text=True,
                timeout=420,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        from marin_resources.ray_head import stop_embedded_head

        stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    (second,) = Path(prefix, "secrets").glob("ray_env_second-*")
    environ = json.loads((second / "environ.json").read_text())
    assert environ.get("JAX_PLATFORMS") == os.environ.get("JAX_PLATFORMS")  # run settings do arrive
    assert [k for k in SECRETS if k in environ] == []
    assert _grep_bytes({"second run's task environment": json.dumps(environ).encode()}) == []
    # Even the run that had the credentials did not hand them to its Ray task.
    (first,) = Path(prefix, "secrets").glob("ray_env_first-*")
    assert _grep_bytes({"first run's task environment": (first / "environ.json").read_bytes()}) == []


def test_embedded_head_environment_is_minimal_and_auth_mode_explicit(tmp_path):
    from marin_resources.ray_head import configure_token_auth, head_environment

    caller = {
        "PATH": "/usr/bin",
        "HOME": str(tmp_path),
        "LC_ALL": "C.UTF-8",
        "RAY_ADDRESS": "127.0.0.1:1",
        "RAY_num_workers_soft_limit": "2",
        "RAY_AUTH_TOKEN": "cluster-token",
        **SECRETS,
    }
    env = head_environment(caller)
    assert [k for k in SECRETS if k in env] == []
    assert env["PATH"] == "/usr/bin" and env["LC_ALL"] == "C.UTF-8" and env["RAY_num_workers_soft_limit"] == "2"
    assert "RAY_ADDRESS" not in env and env["RAY_AUTH_MODE"] == "token"
    # The embedded head's token is its own file, never the caller's RAY_AUTH_TOKEN (which names an
    # external cluster's token and would lock out later runs without it).
    assert "RAY_AUTH_TOKEN" not in env and env["RAY_AUTH_TOKEN_PATH"].endswith("marin_ray_auth_token")
    # An external cluster: token mode when a token is given, else its mode is left to Ray.
    external = {"HOME": str(tmp_path)}
    assert not configure_token_auth(external) and "RAY_AUTH_MODE" not in external
    external["RAY_AUTH_TOKEN"] = "cluster-token"
    assert configure_token_auth(external) and external["RAY_AUTH_MODE"] == "token"


def test_a_failing_step_quoting_its_secret_records_and_raises_it_scrubbed(prefix, monkeypatch):
    from marin_assets.execution import ExecutorOptions, ExecutorStep, this_output_path
    from marin_assets.execution.outcomes import ExecutorError
    from marin_assets.execution.runner import StepRunner
    from marin_assets.execution.status import read_status

    monkeypatch.setenv("MARIN_TEST_API_TOKEN", SECRETS["MARIN_TEST_API_TOKEN"])

    def leaky(config: secret_steps.SecretConfig) -> None:
        raise RuntimeError(f"login failed with token {config.token} and key {config.api_key}")

    step = ExecutorStep(
        "secrets/leaky",
        leaky,
        secret_steps.SecretConfig(
            this_output_path(), api_key=SECRETS["TEST_PLAIN_API_KEY"], token=secret_from_env("MARIN_TEST_API_TOKEN")
        ),
    )
    graph = StepGraph([step], prefix)
    with pytest.raises(ExecutorError) as failure:
        StepRunner(ExecutorOptions()).run(graph)
    status = read_status(graph.resolved(step).output_path)
    assert status.status == "FAILED" and "login failed with token ***" in status.error
    assert _grep_bytes({"status": status.error.encode(), "raised": str(failure.value).encode()}) == []
    assert _grep_bytes(_folder_contents(prefix)) == []


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_KEY",
        "DB_PASS",
        "PGPASSWORD",
        "SSH_KEY",
        "SIGNING_KEY",
        "GITHUB_PAT",
        "DATABASE_URL",
        "SENTRY_DSN",
        "SLACK_BOT_TOKEN",
        "ssh_key",
        "db_password",
        "connection_string",
    ],
)
def test_common_credential_names_are_masked(name, monkeypatch):
    from marin_assets.execution.secrets import environment_secrets
    from marin_resources.secret_rule import is_secret_name

    value = f"value-of-{name.lower()}-SECRET"
    assert is_secret_name(name)
    assert redact_secrets({name: value}) == {name: "***"}
    monkeypatch.setenv(name.upper(), value)
    assert value in environment_secrets()  # scrubbed from errors and metadata when quoted


def test_column_and_tokenizer_names_stay_readable():
    plain = {
        "text_key": "text",
        "id_key": "id",
        "partition_key": "2026-01",
        "landing_key": "drops/a",
        "tokenizer": "gpt2",
        "pad_token": "<pad>",
        "max_tokens": 5,
        "tokens_seen": 9,
        "patience": "long",
    }
    assert redact_secrets(plain) == plain


def test_runtime_env_values_are_recorded_by_name_only(prefix):
    from marin_assets.execution import ExecutorOptions, ExecutorStep, this_output_path
    from marin_assets.execution.runner import StepRunner
    from marin_resources.accelerators import GpuConfig

    neutral = "neutral-name-SECRET-4e5f6a"
    env = {"SERVICE_SETTINGS": neutral, "REGION": "europe-west4-SECRET"}
    step = ExecutorStep(
        "secrets/runtime_env",
        secret_steps.use_environment,
        secret_steps.EnvConfig(this_output_path(), env_vars=env, resources=GpuConfig(runtime_env={"env_vars": env})),
    )
    graph = StepGraph([step], prefix)
    StepRunner(ExecutorOptions()).run(graph)
    out = graph.resolved(step).output_path
    info = read_info(out)
    assert info["config"]["env_vars"] == {"SERVICE_SETTINGS": "***", "REGION": "***"}
    assert "SERVICE_SETTINGS" in json.dumps(info["config"]["resources"])  # the name stays
    assert read_metadata(out) == {"variables": 2, "echo": "***"}  # a value echoed back is scrubbed
    contents = _folder_contents(prefix)
    assert not [p for p, data in contents.items() if neutral.encode() in data or b"europe-west4" in data]
