"""Shared fixtures: every test gets its own Dagster home, Ray temp dir and HF caches (no network)."""

from __future__ import annotations

import os

import pytest

# Nothing may be fetched from the Hugging Face hub at test time.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


@pytest.fixture
def prefix(tmp_path) -> str:
    """A fresh output root for one test."""
    path = tmp_path / "prefix"
    path.mkdir()
    return str(path)


@pytest.fixture
def dagster_home(tmp_path, monkeypatch) -> str:
    """A real on-disk Dagster instance directory (SQLite storage) for one test."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return str(home)
