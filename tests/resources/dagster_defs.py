"""Tiny Dagster assets used by test_dagster_resources (a module, so the multiprocess executor can
reconstruct the job in its step processes)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import dagster as dg

from marin_resources.accelerators import step_resources
from marin_resources.dagster_resources import MarinStorageResource, RayResource


@dataclass(frozen=True)
class Double:
    value: int


def double(config: Double) -> dict:
    import ray

    return {
        "value": config.value * 2,
        "worker_pid": os.getpid(),
        "assigned": dict(ray.get_runtime_context().get_assigned_resources()),
    }


def _launch(ray: RayResource, config: Double, accelerator: str) -> dict:
    """What a step does with the resource: connect (the shared Ray), then a task with its request."""
    ray.connect()
    return step_resources(accelerator).launch(double, config)


def _record(name: str, storage: MarinStorageResource, payload: dict) -> None:
    with storage.storage().open(f"{name}.json", "w") as handle:
        json.dump(payload, handle)


@dg.asset
def ray_step_a(ray: RayResource, marin_storage: MarinStorageResource) -> dict:
    out = _launch(ray, Double(1), "cpu")
    payload = {**out, "gcs": ray.address_in_use(), "step_pid": os.getpid()}
    _record("ray_step_a", marin_storage, payload)
    return payload


@dg.asset
def ray_step_b(ray: RayResource, marin_storage: MarinStorageResource) -> dict:
    out = _launch(ray, Double(2), "tpu:v4-8")
    payload = {**out, "gcs": ray.address_in_use(), "step_pid": os.getpid()}
    _record("ray_step_b", marin_storage, payload)
    return payload


def definitions(prefix: str | None = None) -> dg.Definitions:
    prefix = prefix or os.environ["MARIN_TEST_PREFIX"]
    return dg.Definitions(
        assets=[ray_step_a, ray_step_b],
        jobs=[dg.define_asset_job("two_ray_steps", selection=[ray_step_a, ray_step_b])],
        resources={"ray": RayResource(), "marin_storage": MarinStorageResource(prefix=prefix)},
        executor=dg.multiprocess_executor.configured({"max_concurrent": 2}),
    )


def two_ray_steps_job() -> dg.JobDefinition:
    """Module-level factory for ``dg.reconstructable``."""
    return definitions().resolve_job_def("two_ray_steps")
