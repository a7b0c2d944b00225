"""Every kind of step, run by a driver with no Ray node of its own over ``ray://``.

``python -m tests.deploy.ray_client_steps PREFIX`` runs the steps with ``RAY_ADDRESS=ray://...``
from the environment and prints ``{step name: metadata}`` as one JSON line. Importable by Ray
workers (the functions are module-level).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

import ray

from marin_assets.execution import ExecutorStep, this_output_path
from marin_assets.execution.runner import run_steps
from marin_assets.execution.status import read_metadata
from marin_assets.execution.versioning import StepGraph
from marin_resources.accelerators import CpuConfig, GpuConfig, TpuConfig


@dataclass(frozen=True)
class EchoConfig:
    """The step writes nothing but reports the process it ran in."""

    output_path: str
    kind: str


def echo(config: EchoConfig) -> dict:
    """What a step sees of its process: pid, CUDA devices Ray gave it."""
    return {"kind": config.kind, "pid": os.getpid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


@ray.remote(num_cpus=1)
def echo_remote(config: EchoConfig) -> dict:
    """The same as a ``@ray.remote`` function with its own options."""
    return echo(config)


def build_steps() -> list[ExecutorStep]:
    """Plain, ``@ray.remote``, CPU, GPU and TPU steps."""

    def step(kind: str, fn=echo, resources=None) -> ExecutorStep:
        return ExecutorStep(
            name=f"ray_client/{kind}", fn=fn, config=EchoConfig(this_output_path(), kind), resources=resources
        )

    return [
        step("plain"),
        step("remote", fn=echo_remote),
        step("cpu", resources=CpuConfig(num_cpus=2)),
        step("gpu", resources=GpuConfig(gpu_count=1)),
        step("tpu", resources=TpuConfig(tpu_type="v4-8")),
    ]


def main(prefix: str) -> None:
    """Run the steps under ``prefix`` and print their metadata."""
    steps = build_steps()
    run_steps(steps, prefix)
    graph = StepGraph(steps, prefix)
    print(json.dumps({node.name: read_metadata(node.output_path) for node in graph.topological()}))


if __name__ == "__main__":
    main(sys.argv[1])
