"""The ``marin/version`` a step's definition shows: its own config, secrets hidden (one redaction per
experiment, so each step's version is scrubbed of every step's secret values and the runner's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from marin_assets.execution.declarations import Experiment


@dataclass(frozen=True)
class VersionedConfig:
    output_path: str
    value: Any


def write_nothing(config: VersionedConfig) -> None:
    """A step function never run here: only its definition is built."""


def _definition_versions(defs) -> dict[str, str]:
    return {
        spec.key.to_user_string(): json.dumps(spec.metadata["marin/version"].value)
        for assets_def in defs.assets
        for spec in getattr(assets_def, "specs", ())
        if "marin/version" in spec.metadata
    }


def test_definition_versions_hide_secrets_and_keep_the_rest(tmp_path, monkeypatch):
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path))
    monkeypatch.setenv("LOADTEST_API_TOKEN", "env-secret-0123456789")
    steps = [
        ExecutorStep(
            "secrets/quoted_env",
            write_nothing,
            VersionedConfig(this_output_path(), versioned("run with env-secret-0123456789 today")),
        ),
        ExecutorStep(
            "secrets/named_field",
            write_nothing,
            VersionedConfig(this_output_path(), versioned({"api_token": "tok-abcdef123", "lr": 3})),
        ),
        ExecutorStep(
            "secrets/userinfo",
            write_nothing,
            VersionedConfig(this_output_path(), versioned("https://alice:pw-98765@example.org/data")),
        ),
        ExecutorStep(
            "secrets/reuses_a_token",
            write_nothing,
            VersionedConfig(this_output_path(), versioned("note: tok-abcdef123")),
        ),
    ]
    versions = _definition_versions(build_definitions([Experiment("secrets", steps)]))
    assert len(versions) == 4, versions
    text = "\n".join(versions.values())
    for secret in ("env-secret-0123456789", "tok-abcdef123", "pw-98765"):
        assert secret not in text, text
    assert '"lr": 3' in versions["secrets/named_field"]
    assert "example.org/data" in versions["secrets/userinfo"]
    assert "run with *** today" in versions["secrets/quoted_env"]
    # A secret value one step holds is hidden wherever another step's version quotes it.
    assert "note: ***" in versions["secrets/reuses_a_token"]
