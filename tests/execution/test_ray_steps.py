"""Steps that run on a real local Ray: remote functions, fake TPU slices, infeasible requests."""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_assets.execution import ExecutorError, ExecutorStep, StepGraph, run_steps, this_output_path, versioned
from marin_assets.execution.console import ConsoleProgress
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_metadata, read_status
from marin_resources.accelerators import CpuConfig, GpuConfig, TpuConfig
from marin_resources.ray_config import RayClusterConfig
from marin_resources.ray_connect import ensure_ray
from marin_resources.ray_head import stop_embedded_head

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.ray


@dataclass(frozen=True)
class WhereConfig:
    output_path: str
    tag: str = "x"


def report_placement(config: WhereConfig) -> dict[str, object]:
    """Record which Ray resources the task was given (and prove it ran in a Ray worker)."""
    import ray

    ctx = ray.get_runtime_context()
    resources = ctx.get_assigned_resources()
    os.makedirs(config.output_path, exist_ok=True)
    Path(config.output_path, "placed.txt").write_text(repr(sorted(resources)))
    return {"pid": os.getpid(), "resources": resources, "in_worker": ctx.worker.mode == ray.WORKER_MODE}


@pytest.fixture(scope="module")
def fake_tpu_ray(tmp_path_factory):
    """A local Ray whose only node advertises a fake v4-8 TPU head (what cannot exist here)."""
    import ray

    ray.shutdown()
    temp_dir = f"/tmp/mr-exec-{os.getpid()}"
    old_path = os.environ.get("PYTHONPATH", "")
    # Workers started by the head import the test module by name.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), old_path) if p)
    ensure_ray(RayClusterConfig(num_cpus=4, resources={"TPU": 4, "TPU-v4-8-head": 1}, temp_dir=temp_dir))
    yield
    ray.shutdown()
    stop_embedded_head(temp_dir)
    os.environ["PYTHONPATH"] = old_path


def test_step_requesting_fake_tpu_head_is_scheduled_on_it(fake_tpu_ray, prefix):
    step = ExecutorStep(
        "ray/tpu", report_placement, WhereConfig(this_output_path(), versioned("tpu")), resources=TpuConfig("v4-8")
    )
    report = run_steps([step], prefix)
    assert [o.action for o in report.outcomes] == ["ran"]
    out = StepGraph([step], prefix).resolved(step).output_path
    meta = read_metadata(out)
    assert meta["in_worker"] is True and meta["pid"] != os.getpid()
    assert meta["resources"]["TPU-v4-8-head"] == 1 and meta["resources"]["TPU"] == 4
    assert read_status(out).status == "SUCCESS"


def test_ray_remote_function_step_runs_in_a_worker(fake_tpu_ray, prefix):
    import ray

    remote_fn = ray.remote(num_cpus=1)(report_placement)
    step = ExecutorStep("ray/remote", remote_fn, WhereConfig(this_output_path(), versioned("remote")))
    run_steps([step], prefix)
    meta = read_metadata(StepGraph([step], prefix).resolved(step).output_path)
    assert meta["in_worker"] is True and meta["resources"].get("CPU") == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "resources", [TpuConfig("v5p-8"), GpuConfig(gpu_count=1), CpuConfig(num_cpus=64)], ids=["tpu-v5p", "gpu", "64cpu"]
)
def test_step_requesting_absent_resource_fails_fast_with_clear_error(fake_tpu_ray, prefix, resources):
    step = ExecutorStep(
        "ray/absent", report_placement, WhereConfig(this_output_path(), versioned(repr(resources))), resources=resources
    )
    start = time.monotonic()
    with pytest.raises(ExecutorError) as info:
        run_steps([step], prefix)
    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "ray/absent" in message
    assert any(word in message for word in ("TPU-v5p-8-head", "GPU", "CPU")), message
    out = StepGraph([step], prefix).resolved(step).output_path
    assert read_status(out).status == "FAILED"


def placed_then_failed(config: WhereConfig) -> None:
    """Print a line in the Ray worker, then fail."""
    print(f"worker line of {config.tag}")
    raise ValueError(f"planned failure on a worker ({config.tag})")


def test_a_ray_steps_unit_lines_reach_the_console_once(fake_tpu_ray, prefix, caplog, capsys):
    """A step run on a Ray worker is started and ended by the driver: its console lines (from the
    run's events, ``ConsoleProgress``) appear once each -- not zero, not twice (worker output does
    not carry them)."""
    import ray

    good = ExecutorStep(
        "ray/lines_ok", ray.remote(num_cpus=1)(report_placement), WhereConfig(this_output_path(), versioned("ok"))
    )
    bad = ExecutorStep(
        "ray/lines_bad", placed_then_failed, WhereConfig(this_output_path(), "bad"), resources=CpuConfig()
    )
    options = ExecutorOptions(listeners=(ConsoleProgress(),))
    with caplog.at_level(logging.INFO), pytest.raises(ExecutorError):
        StepRunner(options).run(StepGraph([good, bad], prefix))
    lines = [r.getMessage() for r in caplog.records if r.name == "marin.executor"]
    for unit, end in (("ray/lines_ok", "SUCCESS in"), ("ray/lines_bad", "FAILED after")):
        assert len([line for line in lines if line.startswith(f"{unit}: running ")]) == 1, lines
        assert len([line for line in lines if line.startswith(f"{unit}: {end} ")]) == 1, lines
    (failed,) = [line for line in lines if line.startswith("ray/lines_bad: FAILED after")]
    assert "planned failure on a worker (bad)" in failed
    printed = capsys.readouterr()
    assert printed.out.count("worker line of bad") == 1  # it ran on a worker, whose output reached the driver
    assert "SUCCESS in" not in printed.out + printed.err and "FAILED after" not in printed.out + printed.err


def test_concurrent_ray_steps_in_threads_connect_once(prefix, monkeypatch):
    """Steps run in executor threads; the first ones to need Ray must not both call ray.init."""
    import ray

    ray.shutdown()
    temp_dir = f"/tmp/mr-thr-{os.getpid()}"
    # monkeypatch restores the session's MARIN_RAY_TMPDIR and PYTHONPATH for the tests after this one.
    monkeypatch.setenv("MARIN_RAY_TMPDIR", temp_dir)
    old_path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), old_path) if p))
    try:
        steps = [
            ExecutorStep(
                f"ray/thread{i}",
                ray.remote(num_cpus=1)(report_placement),
                WhereConfig(this_output_path(), versioned(str(i))),
            )
            for i in range(4)
        ]
        report = run_steps(steps, prefix)
        assert sorted(o.action for o in report.outcomes) == ["ran"] * 4
    finally:
        ray.shutdown()
        stop_embedded_head(temp_dir)
