"""Shared fixtures: every test gets its own Dagster home, Ray temp dir and HF caches (no network)."""

from __future__ import annotations

import os

import pytest

import marin_alias

# Marin's names (``marin.*``, ``fray.cluster``, ``experiments.*``) in this process too, as the
# installed ``marin_alias.pth`` gives every interpreter (idempotent when it is installed).
marin_alias.install()

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


@pytest.fixture(scope="session", autouse=True)
def session_ray_tmpdir():
    """One short Ray temp dir for the session; the embedded head started there is stopped at the end.

    Tests and the subprocesses they start inherit ``MARIN_RAY_TMPDIR``, so no Ray is left running
    after the suite (modules with their own cluster use their own temp dir and stop it themselves).
    """
    import tempfile

    previous = os.environ.get("MARIN_RAY_TMPDIR")
    path = tempfile.mkdtemp(prefix="mrt-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = path
    yield path
    try:
        import ray

        ray.shutdown()
        from marin_resources.ray_cluster import stop_embedded_head

        stop_embedded_head(path)
    finally:
        if previous is None:
            os.environ.pop("MARIN_RAY_TMPDIR", None)
        else:
            os.environ["MARIN_RAY_TMPDIR"] = previous


@pytest.fixture(scope="session")
def gcs_server(tmp_path_factory):
    """A real GCS API server on 127.0.0.1 that enforces generation preconditions (see tests/gcs_server.py)."""
    from tests.gcs_server import GcsServer, point_fsspec_at

    server = GcsServer(tmp_path_factory.mktemp("gcs") / "fake-gcs-server.log").start()
    point_fsspec_at(server)
    yield server
    server.stop()


@pytest.fixture
def gcs_prefix(gcs_server) -> str:
    """``gs://<fresh bucket>/marin`` on the session's GCS server (env set for gcsfs and subprocesses)."""
    from tests.gcs_server import point_fsspec_at

    point_fsspec_at(gcs_server)
    return f"gs://{gcs_server.create_bucket()}/marin"
