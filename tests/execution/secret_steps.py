"""Steps that handle secrets, for the secrets tests (importable from subprocesses and Ray workers).

``python -m tests.execution.secret_steps config|ray_env <executor_main args...>``
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, executor_main, this_output_path, versioned
from marin_assets.execution.secrets import EnvSecret, secret_from_env
from marin_assets.execution.storage import atomic_write_text, join_path


@dataclass(frozen=True)
class Mirror:
    url: str
    credentials: str = ""  # a secret-named field of a nested dataclass


@dataclass(frozen=True)
class SecretConfig:
    output_path: str
    api_key: str = ""  # a plain secret put in a config field by mistake: must be redacted
    password: str = ""  # versioned below: enters the version, must be redacted wherever written
    token: str | EnvSecret = ""  # by reference: resolved at run time
    rows: int = 3
    # Secrets deeper down (issue 24.4): a dict value under a secret key, a known secret copied
    # under a harmless key, nested dataclasses, and a list holding a bearer token and an env value.
    headers: dict[str, str] = field(default_factory=dict)
    mirrors: tuple[Mirror, ...] = ()
    extra_args: tuple[str, ...] = ()


def use_secrets(config: SecretConfig) -> dict[str, object]:
    """Check the resolved secret arrived; write only non-secret facts about it."""
    expected = os.environ.get("MARIN_TEST_API_TOKEN", "")
    atomic_write_text(join_path(config.output_path, "result.json"), json.dumps({"rows": config.rows}))
    print(f"use_secrets: running with {config.rows} rows")  # a log line, no secret in it
    return {
        "rows": config.rows,
        "token_resolved": config.token == expected and bool(expected),
        "headers_arrived": config.headers.get("Authorization") == f"Bearer {os.environ.get('TEST_BEARER_TOKEN')}",
    }


def config_steps() -> list[ExecutorStep]:
    return [
        ExecutorStep(
            "secrets/use",
            use_secrets,
            SecretConfig(
                this_output_path(),
                api_key=os.environ.get("TEST_PLAIN_API_KEY", ""),
                password=versioned(os.environ.get("TEST_VERSIONED_PASSWORD", "")),
                token=versioned(secret_from_env("MARIN_TEST_API_TOKEN")),
                headers=versioned(
                    {
                        "Authorization": f"Bearer {os.environ.get('TEST_BEARER_TOKEN', '')}",
                        "X-Copy": os.environ.get("TEST_PLAIN_API_KEY", ""),  # known value, harmless key
                        "Accept": "application/json",
                    }
                ),
                mirrors=versioned(
                    (Mirror("https://mirror.example/data", os.environ.get("TEST_NESTED_CREDENTIAL", "")),)
                ),
                extra_args=(
                    "--header",
                    f"Authorization: Bearer {os.environ.get('TEST_LIST_BEARER', '')}",
                    "--wandb-key",
                    os.environ.get("WANDB_API_KEY", ""),  # an env secret's value, copied into a list
                ),
            ),
        )
    ]


@dataclass(frozen=True)
class EnvDumpConfig:
    output_path: str
    run: str


def dump_task_environment(config: EnvDumpConfig) -> dict[str, int]:
    """Runs as a Ray task: write the task's whole environment (the test greps it)."""
    atomic_write_text(join_path(config.output_path, "environ.json"), json.dumps(dict(os.environ)))
    return {"variables": len(os.environ)}


def ray_env_steps(run: str) -> list[ExecutorStep]:
    from marin_resources.accelerators import CpuConfig

    return [
        ExecutorStep(
            f"secrets/ray_env_{run}",
            dump_task_environment,
            EnvDumpConfig(this_output_path(), versioned(run)),
            resources=CpuConfig(num_cpus=1),
        )
    ]


@dataclass(frozen=True)
class EnvConfig:
    """A step given an environment (as a training step's ``env_vars`` and a resource's runtime_env)."""

    output_path: str
    env_vars: dict[str, str] = field(default_factory=dict)
    resources: object = None


def use_environment(config: EnvConfig) -> dict[str, object]:
    """Writes a file and returns metadata that quotes one of its environment's values."""
    atomic_write_text(join_path(config.output_path, "done.txt"), "ok")
    return {"variables": len(config.env_vars), "echo": next(iter(config.env_vars.values()))}


if __name__ == "__main__":
    which, argv = sys.argv[1], sys.argv[2:]
    if which == "config":
        executor_main(config_steps(), argv=argv)
    else:
        executor_main(ray_env_steps(os.environ["RUN_NAME"]), argv=argv)
