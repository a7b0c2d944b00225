"""Steps launched on a real local Ray whose node carries a fake TPU v4-8 host
(``resources={"TPU": 4, "TPU-v4-8-head": 1}``): what can be tested without TPU hardware."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

from marin_resources.accelerators import (
    CpuConfig,
    GpuConfig,
    InfeasibleResourceError,
    TpuConfig,
)

pytestmark = pytest.mark.ray


@dataclass(frozen=True)
class Job:
    value: int
    sleep_s: float = 0.0


def _report(config: Job) -> dict:
    """Runs inside a Ray worker: what it was given."""
    import ray

    start = time.time()
    time.sleep(config.sleep_s)
    return {
        "result": config.value * 2,
        "pid": os.getpid(),
        "assigned": dict(ray.get_runtime_context().get_assigned_resources()),
        "env": os.environ.get("MARIN_TEST_MARKER"),
        "start": start,
        "end": time.time(),
    }


def test_cpu_launch_runs_in_worker_with_runtime_env(ray_head):
    out = CpuConfig(num_cpus=2).launch(_report, Job(21), runtime_env={"env_vars": {"MARIN_TEST_MARKER": "yes"}})
    assert out["result"] == 42
    assert out["pid"] != os.getpid()
    assert out["assigned"].get("CPU") == 2
    assert out["env"] == "yes"


@pytest.mark.timeout(120)
def test_fake_tpu_single_host_task_gets_head_resource(ray_head):
    out = TpuConfig(tpu_type="v4-8", single_host=True).launch(_report, Job(5))
    assert out["result"] == 10
    assert out["assigned"].get("TPU") == 4
    assert out["assigned"].get("TPU-v4-8-head") == 1


@pytest.mark.timeout(120)
def test_fake_tpu_auto_mode_falls_back_to_plain_task(ray_head):
    # single_host=None: the TPU resources are custom labels, so Levanter's slice actors (which need
    # real TPU hosts) are not used; the step still gets the head resource.
    out = TpuConfig(tpu_type="v4-8").launch(_report, Job(7))
    assert out["result"] == 14
    assert out["assigned"].get("TPU-v4-8-head") == 1


@pytest.mark.timeout(120)
def test_fake_tpu_head_resource_serialises_steps(ray_head):
    # One v4-8 head on the cluster: two TPU steps must not run at the same time.
    import ray

    remote = ray.remote(_report).options(**TpuConfig(tpu_type="v4-8").ray_remote_options())
    first, second = ray.get([remote.remote(Job(1, 1.0)), remote.remote(Job(2, 1.0))])
    earlier, later = sorted([first, second], key=lambda r: r["start"])
    assert later["start"] >= earlier["end"] - 0.05


@pytest.mark.timeout(60)
def test_absent_tpu_type_fails_fast_with_clear_error(ray_head):
    start = time.monotonic()
    with pytest.raises(InfeasibleResourceError, match=r"TPU-v5p-8-head"):
        TpuConfig(tpu_type="v5p-8", single_host=True).launch(_report, Job(1))
    with pytest.raises(InfeasibleResourceError, match=r"TPU-v6e-8-head"):
        TpuConfig(tpu_type="v6e-8").launch(_report, Job(1))  # Levanter path is checked too
    assert time.monotonic() - start < 20


@pytest.mark.timeout(60)
def test_absent_gpu_fails_fast_naming_resources(ray_head):
    with pytest.raises(InfeasibleResourceError) as info:
        GpuConfig(gpu_count=1, accelerator_type="A100").launch(_report, Job(1))
    assert "'GPU'" in str(info.value) and "accelerator_type:A100" in str(info.value)


@pytest.mark.timeout(60)
def test_too_many_cpus_fails_fast(ray_head):
    with pytest.raises(InfeasibleResourceError, match=r"not enough on any one node: CPU \(wants 1000") as info:
        CpuConfig(num_cpus=1000).launch(_report, Job(1))
    assert "the most on one node is 4" in str(info.value)


def test_the_infeasible_message_names_only_what_is_short():
    from marin_resources.accelerators import infeasible_reason

    head = {"CPU": 8.0, "memory": 1e9}
    # The head has the CPU: only the missing label is named, never "CPU (wants 1, largest has 8)".
    reason = infeasible_reason({"CPU": 1.0, "TPU-v5p-8-head": 1.0}, [head])
    assert reason == "no node has 'TPU-v5p-8-head'", reason
    assert "CPU" not in reason
    # Short on one resource: that resource, with the most one node has.
    assert infeasible_reason({"CPU": 16.0}, [head, {"CPU": 4.0}]) == (
        "not enough on any one node: CPU (wants 16, the most on one node is 8)"
    )
    # Everything exists somewhere, but never together on one node.
    reason = infeasible_reason({"CPU": 4.0, "GPU": 1.0}, [{"CPU": 8.0}, {"CPU": 1.0, "GPU": 1.0}])
    assert reason.startswith("each resource is on some node, but no single node has all of CPU 4, GPU 1"), reason


@pytest.mark.timeout(60)
def test_fake_tpu_detection_and_declared_autoscaler(ray_head, monkeypatch):
    from marin_resources import accelerators

    # The fake head is a custom label on an ordinary node: not a TPU host Ray detected.
    assert accelerators._real_tpu_heads("TPU-v4-8-head") is False
    # No live v4-16 head: only an autoscaler could add one, and it would add real hosts.
    assert accelerators._real_tpu_heads("TPU-v4-16-head") is True
    with pytest.raises(InfeasibleResourceError, match="no autoscaler"):
        accelerators.check_feasible({"resources": {"TPU-v4-16-head": 1}})
    # With an autoscaler declared (v1 autoscalers publish no node types), Ray is left to wait.
    monkeypatch.setenv("MARIN_RAY_AUTOSCALER", "1")
    accelerators.check_feasible({"resources": {"TPU-v4-16-head": 1}})
