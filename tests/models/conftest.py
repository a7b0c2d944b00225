"""Shared fixtures of the model tests: offline env, one short-lived local Ray, the quickstart run."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile

import pytest

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "TOKENIZERS_PARALLELISM": "false",
}


def _kill_ray_started_in(temp_dir: str) -> None:
    """Kill the Ray processes of *our* embedded head only (by pid), not every Ray on the machine.

    ``ray stop --force`` would also stop clusters of other sessions sharing this machine.
    """
    import psutil

    victims: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(temp_dir in part for part in (proc.info["cmdline"] or [])):
                victims[proc.pid] = proc
                for child in proc.children(recursive=True):
                    victims[child.pid] = child
    victims.pop(os.getpid(), None)
    for proc in victims.values():
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(list(victims.values()), timeout=10)


@pytest.fixture(scope="session", autouse=True)
def offline_env():
    """No hub downloads and no W&B in any test or subprocess of this folder."""
    old = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def ray_session():
    """A private embedded Ray head for this test session (short temp dir: socket path limits)."""
    temp_dir = tempfile.mkdtemp(prefix="mrt-", dir="/tmp")
    old = os.environ.get("MARIN_RAY_TMPDIR")
    os.environ["MARIN_RAY_TMPDIR"] = temp_dir
    os.environ.pop("RAY_ADDRESS", None)
    from marin_resources.ray_cluster import ensure_ray

    ensure_ray()
    yield temp_dir
    import ray

    ray.shutdown()
    _kill_ray_started_in(temp_dir)
    shutil.rmtree(temp_dir, ignore_errors=True)
    if old is None:
        os.environ.pop("MARIN_RAY_TMPDIR", None)
    else:
        os.environ["MARIN_RAY_TMPDIR"] = old


@pytest.fixture(scope="session")
def quickstart_run(ray_session, tmp_path_factory):
    """The "test"-size quickstart run once through the real step engine; shared by several tests."""
    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.models.quickstart_steps import quickstart_model_steps

    prefix = str(tmp_path_factory.mktemp("quickstart"))
    steps = quickstart_model_steps(size="test")
    report = run_steps(steps, prefix)
    failed = [(o.name, o.error) for o in report.failed]
    assert not failed, failed
    graph = StepGraph(steps, prefix)
    paths = {graph.resolved(s).name.split("/")[0]: graph.resolved(s).output_path for s in steps}
    return {"prefix": prefix, "steps": steps, "report": report, "paths": paths}
