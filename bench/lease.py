"""Lease benchmark on a GCS API server (fake-gcs-server on 127.0.0.1, the tests' emulator).

Prints, as JSON:

* acquire / renew / release latency of a ``StepLease`` on gs:// (median and p90 over ``--rounds``),
  as ratios against a plain one-object write and read in the same process (the baseline: what one
  request costs here), and the same on a local folder;
* a cached re-run of a ``--steps``-step DAG on gs:// through ``executor_main`` (goal <= 2 s; the
  statuses are read in one concurrent batch), as a ratio against reading every status one by one;
* the cost of fenced outputs (attempt staging + publish under the lease, ``execution.attempt``):
  one step writing ``--output_mb`` MB in ``--output_files`` files through the runner, against the
  same function writing straight to a folder (the unfenced baseline), local and gs://; with the
  publish step timed alone;
* the cost of resuming across hosts (``execution.attempt.copy_attempt``): a takeover from a stale
  holder on another host whose attempt staged ``--adopt_mb`` MB of checkpoint in
  ``--adopt_objects`` objects (copied server-side into the new attempt, then published), against a
  plain re-run of the same step from scratch (its only work is writing that checkpoint: a floor --
  a real training step re-computes everything since its start).

    python -m bench.lease [--steps 200] [--rounds 50] [--output_mb 1024] [--output_files 16]
                          [--adopt_mb 1024] [--adopt_objects 100] [--only lease|rerun|fenced_write|adoption]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, StepGraph, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.lease import lease_for_output
from marin_assets.execution.status import read_status
from marin_assets.execution.storage import atomic_write_text, join_path, read_bytes


@dataclass(frozen=True)
class TrivialConfig:
    """A step that writes one small file."""

    output_path: str
    index: int
    inputs: list = field(default_factory=list)


def trivial(config: TrivialConfig) -> dict[str, int]:
    """Write the step index and the number of inputs (any fsspec prefix)."""
    atomic_write_text(join_path(config.output_path, "out.json"), json.dumps({"index": config.index}))
    return {"inputs": len(config.inputs)}


def generate_dag(n: int, seed: int = 0) -> list[ExecutorStep]:
    """``n`` steps; each depends on up to two random earlier steps."""
    rng = random.Random(seed)
    steps: list[ExecutorStep] = []
    for i in range(n):
        parents = rng.sample(steps, k=min(len(steps), rng.randint(0, 2))) if steps else []
        steps.append(
            ExecutorStep(
                f"bench/lease{i:04d}",
                trivial,
                TrivialConfig(this_output_path(), versioned(i), [output_path_of(p) for p in parents]),
            )
        )
    return steps


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
    }


def lease_latency(prefix: str, rounds: int) -> dict[str, dict[str, float]]:
    """Median/p90 of acquire, renew, release and of a plain write/read on ``prefix``."""
    timings: dict[str, list[float]] = {"acquire": [], "renew": [], "release": [], "plain_write": [], "plain_read": []}
    for i in range(rounds):
        lease = lease_for_output(join_path(prefix, f"lease-bench/o{i}"), heartbeat_s=3600, stale_s=7200)
        start = time.perf_counter()
        assert lease.try_acquire()
        timings["acquire"].append(time.perf_counter() - start)
        start = time.perf_counter()
        with lease._lock:  # one heartbeat, as the background thread does it
            assert lease._renew_locked()
        timings["renew"].append(time.perf_counter() - start)
        start = time.perf_counter()
        lease.release()
        timings["release"].append(time.perf_counter() - start)
        path = join_path(prefix, f"lease-bench/plain{i}.json")
        start = time.perf_counter()
        atomic_write_text(path, '{"x": 1}')
        timings["plain_write"].append(time.perf_counter() - start)
        start = time.perf_counter()
        read_bytes(path)
        timings["plain_read"].append(time.perf_counter() - start)
    out = {name: _ms(samples) for name, samples in timings.items()}
    baseline = out["plain_write"]["median_ms"]
    for name in ("acquire", "renew", "release"):
        out[name]["x_plain_write"] = round(out[name]["median_ms"] / baseline, 2) if baseline else None
    return out


def cached_rerun(prefix: str, n: int) -> dict[str, float]:
    """First run, cached re-run through executor_main, and the one-by-one status read baseline."""
    steps = generate_dag(n)
    argv = ["--prefix", prefix, "--no_record", "--max_concurrent", "8"]
    start = time.perf_counter()
    executor_main(steps, argv=argv)
    first = time.perf_counter() - start
    start = time.perf_counter()
    report = executor_main(steps, argv=argv)
    cached = time.perf_counter() - start
    assert report is not None and len(report.by_action("cached")) == n, "the re-run recomputed steps"
    graph = StepGraph(steps, prefix)
    start = time.perf_counter()
    for node in graph.topological():
        read_status(node.output_path)
    sequential = time.perf_counter() - start
    return {
        "steps": n,
        "first_run_s": round(first, 2),
        "cached_rerun_s": round(cached, 2),
        "goal_s": 2.0,
        "sequential_status_reads_s": round(sequential, 2),
        "cached_rerun_x_sequential_reads": round(cached / sequential, 2) if sequential else None,
    }


@dataclass(frozen=True)
class BigConfig:
    """Write ``mb`` MB of incompressible bytes in ``files`` files below ``output_path``."""

    output_path: str
    mb: int
    files: int


_BLOCK = os.urandom(1 << 20)


def write_big(config: BigConfig) -> dict[str, int]:
    """The payload of the fenced-write benchmark (plain fsspec writes, 1 MiB at a time)."""
    import fsspec

    per_file = config.mb // config.files
    for f in range(config.files):
        with fsspec.open(join_path(config.output_path, f"part-{f:03d}.bin"), "wb") as handle:
            for _ in range(per_file):
                handle.write(_BLOCK)
    return {"mb": per_file * config.files}


def fenced_write(prefix: str, mb: int, files: int) -> dict[str, float]:
    """Seconds to write ``mb`` MB unfenced (straight to a folder) and through the runner (staged,
    then published under the lease); publish timed alone."""
    from marin_assets.execution import runner, step_attempt

    start = time.perf_counter()
    write_big(BigConfig(join_path(prefix, "unfenced"), mb, files))
    unfenced = time.perf_counter() - start

    published: list[float] = []
    original = step_attempt.publish  # the attempt publishes (execution/step_attempt.py)

    def timed_publish(*args, **kwargs):  # noqa: ANN002, ANN003 - passes through
        t = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            published.append(time.perf_counter() - t)

    step_attempt.publish = timed_publish
    try:
        step = ExecutorStep("bench/big", write_big, BigConfig(this_output_path(), versioned(mb), versioned(files)))
        start = time.perf_counter()
        report = runner.StepRunner(runner.ExecutorOptions()).run(StepGraph([step], prefix))
        fenced = time.perf_counter() - start
    finally:
        step_attempt.publish = original
    assert [o.action for o in report.outcomes] == ["ran"]
    return {
        "mb": mb,
        "files": files,
        "unfenced_write_s": round(unfenced, 2),
        "fenced_step_s": round(fenced, 2),
        "publish_s": round(published[0], 3),
        "fenced_x_unfenced": round(fenced / unfenced, 3),
    }


@dataclass(frozen=True)
class CheckpointingConfig:
    """A training-like step: its work is writing ``mb`` MB of checkpoint in ``objects`` objects."""

    output_path: str
    mb: int
    objects: int


def checkpointing_step(config: CheckpointingConfig) -> dict[str, int]:
    """Write the checkpoint objects that are not there yet (a resumed attempt finds them all)."""
    from marin_assets.execution.storage import filesystem

    fs, root = filesystem(join_path(config.output_path, "checkpoints"))
    have = {p.rsplit("/", 1)[-1] for p in fs.find(root)} if fs.exists(root) else set()
    per_object = (config.mb << 20) // config.objects
    payload = (_BLOCK * (per_object // len(_BLOCK) + 1))[:per_object]
    written = 0
    for i in range(config.objects):
        name = f"shard-{i:04d}.bin"
        if name not in have:
            fs.pipe_file(f"{root}/{name}", payload)
            written += 1
    return {"objects_written": written}


def adoption(prefix_of: object, mb: int, objects: int) -> dict[str, float]:
    """Seconds for a takeover that adopts a previous attempt's ``mb`` MB checkpoint (in ``objects``
    objects) by server-side copy, against a plain re-run of the same step from scratch."""
    from marin_assets.execution import attempt, runner, step_attempt
    from marin_assets.execution.lease import StepLease
    from marin_assets.execution.status import write_status_if

    def step_graph(prefix: str) -> tuple[StepGraph, str]:
        step = ExecutorStep(
            "bench/ckpt", checkpointing_step, CheckpointingConfig(this_output_path(), versioned(mb), versioned(objects))
        )
        graph = StepGraph([step], prefix)
        return graph, graph.resolved(step).output_path

    timings: dict[str, list[float]] = {"copy_attempt": [], "publish": [], "discard_attempts": []}

    def timed(name: str):  # noqa: ANN202 - a pass-through wrapper
        original = getattr(step_attempt, name)

        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003 - passes through
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timings[name].append(time.perf_counter() - t)

        return original, wrapper

    originals = {}
    for name in timings:
        originals[name], wrapper = timed(name)
        setattr(step_attempt, name, wrapper)
    try:
        # A plain re-run from scratch: the step writes its whole checkpoint, then it is published.
        graph, _ = step_graph(prefix_of())  # type: ignore[operator]
        start = time.perf_counter()
        report = runner.StepRunner(runner.ExecutorOptions()).run(graph)
        scratch = time.perf_counter() - start
        assert report.outcomes[0].metadata["objects_written"] == objects
        scratch_publish = timings["publish"][-1]

        # A takeover: attempt "prev" of a holder on another host went stale with its checkpoint staged.
        graph, out = step_graph(prefix_of())  # type: ignore[operator]
        lease = StepLease(join_path(out, ".executor_lease"))
        assert write_status_if(out, "RUNNING", None, lease.backend, run_id="prev", attempt="prev")
        checkpointing_step(CheckpointingConfig(attempt.staging_path(out, "prev"), mb, objects))
        holder = json.loads(lease._content())
        holder.update(host="another-host", heartbeat=time.time() - 3600)
        assert lease.backend.create_exclusive(lease.path, json.dumps(holder).encode())
        discarded_before = len(timings["discard_attempts"])
        start = time.perf_counter()
        # Staleness is judged on the taker's own clock (an hour-old timestamp is not believed): it
        # watches the lease for stale_s first, kept short here (0.5 s, inside the figure).
        report = runner.StepRunner(runner.ExecutorOptions(heartbeat_s=0.2, stale_s=0.5, poll_s=0.05)).run(graph)
        adopted = time.perf_counter() - start
    finally:
        for name, original in originals.items():
            setattr(step_attempt, name, original)
    assert report.outcomes[0].metadata["objects_written"] == 0 and len(timings["copy_attempt"]) == 1
    return {
        "mb": mb,
        "objects": objects,
        "rerun_from_scratch_s": round(scratch, 2),
        "rerun_publish_s": round(scratch_publish, 2),
        "takeover_with_adoption_s": round(adopted, 2),
        "adoption_copy_s": round(timings["copy_attempt"][0], 2),
        "adoption_discard_s": round(sum(timings["discard_attempts"][discarded_before:]), 2),
        "adoption_publish_s": round(timings["publish"][-1], 2),
        "adoption_x_rerun": round(adopted / scratch, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--output_mb", type=int, default=1024)
    parser.add_argument("--output_files", type=int, default=16)
    parser.add_argument("--adopt_mb", type=int, default=1024)
    parser.add_argument("--adopt_objects", type=int, default=100)
    parser.add_argument("--only", choices=["lease", "rerun", "fenced_write", "adoption"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["lease", "rerun", "fenced_write", "adoption"])
    import logging

    logging.basicConfig(level=logging.WARNING)
    from tests.gcs_server import GcsServer, point_fsspec_at

    with tempfile.TemporaryDirectory(prefix="bench-lease-") as tmp:
        server = GcsServer(f"{tmp}/fake-gcs-server.log").start()
        try:
            point_fsspec_at(server)
            bucket = lambda name: f"gs://{server.create_bucket()}/{name}"  # noqa: E731
            result: dict[str, object] = {}
            if "lease" in only:
                result["gcs_lease"] = lease_latency(bucket("marin"), args.rounds)
                result["local_lease"] = lease_latency(f"{tmp}/local", args.rounds)
            if "rerun" in only:
                result["gcs_cached_rerun"] = cached_rerun(bucket("dag"), args.steps)
            if "fenced_write" in only:
                result["local_fenced_write"] = fenced_write(f"{tmp}/big", args.output_mb, args.output_files)
                result["gcs_fenced_write"] = fenced_write(bucket("big"), args.output_mb, args.output_files)
            if "adoption" in only:
                result["gcs_adoption"] = adoption(lambda: bucket("adopt"), args.adopt_mb, args.adopt_objects)
        finally:
            server.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
