"""Step-engine benchmark: a generated DAG of trivial steps.

Prints: first run, fully cached re-run through ``executor_main`` and through Dagster
(``dagster.materialize`` on a real on-disk instance), and the time to build Definitions for a
1,000-step experiment. Goals (2 cores): cached re-run <= 5 s, 1,000-step load <= 3 s.

    python -m bench.engine [--steps 200] [--load_steps 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field

from marin_assets.execution import (
    ExecutorOptions,
    ExecutorStep,
    StepGraph,
    executor_main,
    output_path_of,
    this_output_path,
    versioned,
)
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class TrivialConfig:
    """A step that writes one small file."""

    output_path: str
    index: int
    inputs: list = field(default_factory=list)


def trivial(config: TrivialConfig) -> dict[str, int]:
    """Write the step index and the number of inputs."""
    atomic_write_text(
        os.path.join(config.output_path, "out.json"), json.dumps({"index": config.index, "inputs": len(config.inputs)})
    )
    return {"inputs": len(config.inputs)}


def generate_dag(n: int, seed: int = 0) -> list[ExecutorStep]:
    """``n`` steps; each depends on up to two random earlier steps."""
    rng = random.Random(seed)
    steps: list[ExecutorStep] = []
    for i in range(n):
        parents = rng.sample(steps, k=min(len(steps), rng.randint(0, 2))) if steps else []
        steps.append(
            ExecutorStep(
                f"bench/s{i:04d}",
                trivial,
                TrivialConfig(this_output_path(), versioned(i), [output_path_of(p) for p in parents]),
            )
        )
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--load_steps", type=int, default=1000)
    args = parser.parse_args()
    os.environ["MARIN_RUN_OBSERVERS"] = ""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        os.environ["DAGSTER_HOME"] = os.path.join(tmp, "dagster_home")
        os.makedirs(os.environ["DAGSTER_HOME"])
        steps = generate_dag(args.steps)
        t = time.perf_counter()
        report = StepRunner(ExecutorOptions(max_concurrent=4)).run(StepGraph(steps, prefix))
        first = time.perf_counter() - t
        assert len(report.by_action("ran")) == args.steps
        t = time.perf_counter()
        report = executor_main(steps, argv=["--prefix", prefix, "--no_record"])
        cached_cli = time.perf_counter() - t
        assert report is not None and len(report.by_action("cached")) == args.steps

        import dagster as dg

        from marin_assets.dagster_bridge.step_ops import build_step_assets
        from marin_assets.execution.declarations import Experiment
        from marin_resources.dagster_resources import MarinStorageResource, RayResource

        t = time.perf_counter()
        assets = build_step_assets(Experiment("bench", steps), prefix=prefix)
        instance = dg.DagsterInstance.get()
        result = dg.materialize(
            assets,
            instance=instance,
            resources={"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()},
        )
        cached_dagster = time.perf_counter() - t
        assert result.success
        cached_flags = [
            e.event_specific_data.materialization.metadata["marin/cached"].value
            for e in result.get_asset_materialization_events()
        ]
        assert all(cached_flags) and len(cached_flags) == args.steps

        # Baseline: plain Dagster assets of the same shape that do nothing, on a fresh on-disk
        # instance -- the per-asset cost Dagster itself adds (event log writes, step setup).
        plain = []
        for asset_def in assets:
            for key in asset_def.keys:
                deps = list(asset_def.asset_deps[key])
                plain.append(dg.asset(key=key, deps=deps)(lambda: dg.MaterializeResult()))
        os.makedirs(os.path.join(tmp, "baseline_home"))
        baseline_instance = dg.DagsterInstance.local_temp(tempdir=os.path.join(tmp, "baseline_home"))
        t = time.perf_counter()
        assert dg.materialize(plain, instance=baseline_instance).success
        plain_dagster = time.perf_counter() - t

        big = generate_dag(args.load_steps, seed=1)
        t = time.perf_counter()
        from marin_assets.definitions import build_definitions

        defs = build_definitions([Experiment("bench_load", big)])
        defs.resolve_asset_graph()
        load = time.perf_counter() - t

    print(f"engine benchmark ({args.steps}-step DAG, {os.cpu_count()} cores)")
    print(f"  first run (executor, 4 threads):      {first:7.2f} s  ({args.steps / first:.0f} steps/s)")
    print(f"  cached re-run via executor_main:      {cached_cli:7.2f} s  (goal <= 5 s)")
    print(f"  cached re-run via dagster.materialize: {cached_dagster:7.2f} s  (goal <= 5 s)")
    print(
        f"  plain no-op Dagster assets, same DAG:  {plain_dagster:7.2f} s  (ratio ours/plain {cached_dagster / plain_dagster:.2f})"
    )
    print(f"  Definitions for {args.load_steps} steps:            {load:7.2f} s  (goal <= 3 s)")


if __name__ == "__main__":
    main()
