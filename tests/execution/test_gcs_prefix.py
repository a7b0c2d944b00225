"""The engine on gs:// (a real GCS API server that enforces generation preconditions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import fsspec
import pytest

from marin_assets.execution import ExecutorOptions, StepGraph
from marin_assets.execution.conditional import UnsupportedStorageError, backend_for
from marin_assets.execution.gcs import GCSLeaseBackend
from marin_assets.execution.lease import DEFAULT_STALE_S, StepLease, lease_for_output
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_status, read_statuses, write_status_if
from marin_assets.experiments import hello_world
from tests.execution.sample_steps import diamond
from tests.manual_clock import ManualClock

REPO = Path(__file__).resolve().parents[2]


def test_gcs_backend_create_if_absent_and_compare_and_swap(gcs_prefix):
    backend = backend_for(gcs_prefix)
    assert isinstance(backend, GCSLeaseBackend)
    path = f"{gcs_prefix}/x/.executor_lease"
    first = backend.create_exclusive(path, b"one")
    assert first is not None
    assert backend.create_exclusive(path, b"two") is None  # 412: exists
    assert backend.read(path) == (b"one", first)
    second = backend.replace_if(path, first, b"three")
    assert second is not None and second != first
    assert backend.replace_if(path, first, b"zombie") is None  # stale generation: 412
    assert backend.read(path) == (b"three", second)
    assert not backend.delete_if(path, first)
    assert backend.delete_if(path, second)
    assert backend.read(path) is None


def test_concurrent_creates_have_exactly_one_winner(gcs_prefix):
    backend = backend_for(gcs_prefix)
    path = f"{gcs_prefix}/race/.executor_lease"
    results: list[str | None] = []
    barrier = threading.Barrier(8)

    def create(i: int) -> None:
        barrier.wait()
        results.append(backend.create_exclusive(path, f"writer {i}".encode()))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1


def test_lease_takeover_and_fenced_status_on_gcs(gcs_prefix):
    out = f"{gcs_prefix}/leased-abc123"
    clock = ManualClock()  # default heartbeat/stale timing, moved by the test instead of slept
    first = lease_for_output(out, clock=clock)
    assert first.try_acquire()
    second = StepLease(first.path, clock=clock)
    assert not second.try_acquire()
    token = write_status_if(out, "RUNNING", None, first.backend, run_id="first")
    assert token is not None
    clock.advance(2 * DEFAULT_STALE_S)  # renewed on gs:// at every heartbeat: still live
    assert not second.try_acquire() and first.holder().seq > 1
    first._stop.set()  # the holder freezes: no more heartbeats
    first._thread.join()
    clock.advance(DEFAULT_STALE_S + 1)
    assert second.try_acquire()
    # The new holder writes RUNNING; the frozen one can no longer flip the status.
    status, current = read_status(out), second.backend.read(f"{out}/.executor_status")
    assert status.run_id == "first"
    assert write_status_if(out, "RUNNING", current[1], second.backend, run_id="second") is not None
    assert write_status_if(out, "SUCCESS", token, first.backend, run_id="first") is None
    assert read_status(out).run_id == "second"
    second.release()
    assert second.holder() is None


def test_storage_without_conditional_writes_fails_once_at_startup():
    calls: list[str] = []
    graph = StepGraph(diamond(), "http://127.0.0.1:9/marin")  # HTTP: reads, but no conditional writes
    with pytest.raises(UnsupportedStorageError, match=r"http:// .* cannot do the conditional writes"):
        StepRunner(ExecutorOptions(), launch=lambda node, config: calls.append(node.name)).run(graph)
    assert calls == []
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "marin_assets.experiments.hello_world",
            "--prefix",
            "http://127.0.0.1:9/m",
            "--no_record",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert cli.returncode == 2
    assert cli.stderr.count("cannot do the conditional writes") == 1 and "Traceback" not in cli.stderr


def _hello(prefix: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "marin_assets.experiments.hello_world", "--prefix", prefix, "--no_record"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_hello_world_on_gcs_computes_skips_and_matches_local_hashes(gcs_prefix, prefix):
    first = _hello(gcs_prefix)
    assert first["ran"] == 2
    again = _hello(gcs_prefix)
    assert again["ran"] == 0 and again["cached"] == 2
    local = _hello(prefix)
    assert local["ran"] == 2
    gcs_graph, local_graph = StepGraph(hello_world.STEPS, gcs_prefix), StepGraph(hello_world.STEPS, prefix)
    gcs_hashes = [n.hash for n in gcs_graph.topological()]
    assert gcs_hashes == [n.hash for n in local_graph.topological()]
    stats = gcs_graph.resolved(hello_world.STEPS[1]).output_path
    with fsspec.open(f"{stats}/stats.json") as handle:
        on_gcs = json.load(handle)
    local_stats = local_graph.resolved(hello_world.STEPS[1]).output_path
    assert on_gcs == json.loads(Path(local_stats, "stats.json").read_text())
    statuses = read_statuses([n.output_path for n in gcs_graph.topological()])
    assert Counter(s.status for s in statuses.values()) == Counter({"SUCCESS": 2})
    fs, _ = fsspec.core.url_to_fs(gcs_prefix)
    # No rename happened on GCS: no temporary objects are left next to the outputs.
    assert not [p for p in fs.find(gcs_prefix.removeprefix("gs://")) if ".tmp" in p]


def test_four_racing_runners_on_gcs_compute_each_step_exactly_once(gcs_prefix, tmp_path):
    markers = tmp_path / "markers"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MARKER_DIR": str(markers), "PART_DELAY_S": "0.05"}
    cmd = [sys.executable, "-m", "tests.execution.fencing_steps", "chain", "--prefix", gcs_prefix, "--no_record"]
    procs = [
        subprocess.Popen(
            [*cmd, "--heartbeat_s", "1", "--stale_s", "10"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    starts = Counter(
        line.split()[1] for line in (markers / "events.log").read_text().splitlines() if line.startswith("start")
    )
    assert starts == Counter({f"chain{i}": 1 for i in range(6)})
    summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(s["ran"] for s in summaries) == 6
    assert sum(s["ran"] + s["cached"] + s["waited"] for s in summaries) == 24
