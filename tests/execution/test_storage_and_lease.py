"""Storage and lease details: fresh listings, aborting writes, verify under the renewal lock,
leftover temporary lease files, URL credentials in ``.executor_info``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import fsspec
import pytest

from marin_assets.core.io import JsonlShardWriter
from marin_assets.execution import ExecutorStep, StepGraph, this_output_path
from marin_assets.execution.fence import LeaseLostError
from marin_assets.execution.lease import StepLease, lease_for_output
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_info
from marin_assets.execution.storage import exists, filesystem, join_path, list_dir, open_for_write, read_bytes
from tests.manual_clock import ManualClock


def _in_new_thread(fn):
    """Run ``fn`` in a fresh thread (fsspec hands each thread its own gcsfs instance)."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def _put(path: str, data: bytes) -> None:
    _in_new_thread(lambda: filesystem(path)[0].pipe_file(filesystem(path)[1], data))


def test_a_long_lived_thread_sees_objects_added_since_its_last_listing(gcs_prefix):
    folder = join_path(gcs_prefix, "zone")
    _put(join_path(folder, "drop-001/manifest.json"), b"{}")
    names = lambda: sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in list_dir(folder))  # noqa: E731
    assert names() == ["drop-001"]
    assert not exists(join_path(folder, "drop-002/manifest.json"))
    # Control: fsspec's default instance in this thread caches the listing it made.
    raw = fsspec.filesystem("gs")
    raw_path = filesystem(folder)[1]
    assert len(raw.ls(raw_path)) == 1
    _put(join_path(folder, "drop-002/manifest.json"), b"{}")
    _put(join_path(folder, "drop-003/manifest.json"), b"{}")
    assert len(raw.ls(raw_path)) == 1  # the stale listing the sensor used to decide on
    # Through the engine's storage: what the store holds now, in the same thread.
    assert names() == ["drop-001", "drop-002", "drop-003"]
    assert exists(join_path(folder, "drop-002/manifest.json"))
    fs, p = filesystem(folder)
    assert len(fs.find(p)) == 3 and fs.isdir(join_path(p, "drop-003"))


class _Boom(BaseException):
    """Not an Exception: stands for a step cancellation or KeyboardInterrupt."""


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_a_write_context_that_raises_leaves_no_object(where, prefix, request):
    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    path = join_path(base, "out/part.bin")
    with pytest.raises(_Boom), open_for_write(path) as handle:
        handle.write(b"x" * 100_000)
        raise _Boom
    assert read_bytes(path) is None
    with open_for_write(path) as handle:
        handle.write(b"whole")
    assert read_bytes(path) == b"whole"
    shard = join_path(base, "out/shard-00000.jsonl.gz")
    with pytest.raises(_Boom), JsonlShardWriter(shard) as writer:
        for i in range(1000):
            writer.write({"i": i})
        raise _Boom
    assert read_bytes(shard) is None
    # Dropped without close() (no ``with``): collected, still nothing uploaded.
    writer = JsonlShardWriter(join_path(base, "out/dropped.jsonl"))
    writer.write({"i": 1})
    writer._drain()
    del writer
    assert read_bytes(join_path(base, "out/dropped.jsonl")) is None


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_verify_never_reports_a_false_loss_at_a_fast_heartbeat(where, prefix, request):
    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    lease = lease_for_output(join_path(base, "step"), heartbeat_s=0.05, stale_s=2.0)
    assert lease.try_acquire()
    try:
        deadline = time.monotonic() + 3.0
        verified = 0
        while time.monotonic() < deadline:
            lease.verify()  # raised LeaseLostError 20 of 20 runs before (read outside the lock)
            verified += 1
        assert verified > 20 and not lease.lost.is_set()
        assert lease.holder().seq > 10  # the heartbeat did renew meanwhile
    finally:
        lease.release()
    # A real takeover is still detected.
    other = StepLease(lease.path, lease.backend, heartbeat_s=0.05, stale_s=2.0)
    assert lease.try_acquire()
    current = lease.backend.read(lease.path)
    assert lease.backend.replace_if(lease.path, current[1], other._content()) is not None
    with pytest.raises(LeaseLostError):
        lease.verify()
    lease.release()


def test_leftover_tmp_lease_files_are_removed_on_the_next_acquire(prefix):
    lease = lease_for_output(join_path(prefix, "step"), heartbeat_s=0.2, stale_s=1.0)
    folder = os.path.dirname(lease.path)
    os.makedirs(folder)
    old = os.path.join(folder, ".tmp-lease-0123456789abcdef")
    fresh = os.path.join(folder, ".tmp-lease-fedcba9876543210")  # a live writer's, mid-write
    for path in (old, fresh):
        with open(path, "wb") as handle:
            handle.write(b'{"owner": "killed"}')
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    # Written a moment ago by a runner that was then SIGKILLed: its content names a dead holder.
    killed = os.path.join(folder, ".tmp-lease-00000000deadbeef")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    content = json.loads(lease._content())
    content.update(pid=dead.pid)
    with open(killed, "w") as handle:
        json.dump(content, handle)
    assert lease.try_acquire()
    lease.release()
    assert not os.path.exists(old) and not os.path.exists(killed)
    assert os.path.exists(fresh)
    assert [n for n in os.listdir(folder) if n.startswith(".tmp-lease-")] == [os.path.basename(fresh)]


@dataclass(frozen=True)
class EndpointConfig:
    output_path: str
    endpoint: str
    mirrors: tuple[str, ...] = ()


def _noop(config: EndpointConfig) -> dict[str, str]:
    return {"used": config.endpoint}


def test_credentials_inside_urls_are_redacted_in_executor_info(prefix):
    step = ExecutorStep(
        "creds/step",
        _noop,
        EndpointConfig(
            this_output_path(),
            "https://alice:s3cr3t-pw@data.example.com/v1",
            ("ftp://bob:hunter2@mirror.example.org/x", "https://example.com/plain"),
        ),
    )
    graph = StepGraph([step], prefix)
    report = StepRunner(ExecutorOptions()).run(graph)
    assert [o.action for o in report.outcomes] == ["ran"]
    out = graph.resolved(step).output_path
    info = read_info(out)
    assert info["config"]["endpoint"] == "https://***@data.example.com/v1"
    assert info["config"]["mirrors"] == ["ftp://***@mirror.example.org/x", "https://example.com/plain"]
    stored = "".join(
        (read_bytes(join_path(out, name)) or b"").decode() for name in (".executor_info", ".executor_metadata.json")
    )
    assert "s3cr3t-pw" not in stored and "hunter2" not in stored and "alice:" not in stored
    assert json.loads(read_bytes(join_path(out, ".executor_metadata.json")))["used"].startswith("https://***@")


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_a_run_without_competitor_never_loses_its_leases_at_a_fast_heartbeat(where, prefix, request):
    from bench.lease import generate_dag

    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    steps = generate_dag(30)
    report = StepRunner(ExecutorOptions(heartbeat_s=0.05, stale_s=1.0)).run(StepGraph(steps, base))
    assert [o.action for o in report.outcomes].count("ran") == 30


def test_a_holder_silent_past_half_stale_renews_on_check_or_finds_the_lease_lost(tmp_path):
    clock = ManualClock()
    path = str(tmp_path / ".executor_lease")
    holder = StepLease(path, heartbeat_s=30, stale_s=90, clock=clock)
    assert holder.try_acquire()
    holder._stop.set()  # frozen: the heartbeat thread does not run
    holder._thread.join()
    clock.advance(50)  # past stale_s / 2 without a confirmed renewal: check() renews synchronously
    seq = holder.holder().seq
    holder.check()
    assert holder.holder().seq == seq + 1 and not holder.lost.is_set()
    other = StepLease(path, heartbeat_s=30, stale_s=90, clock=clock)
    assert not other.try_acquire()  # staleness is measured from when *it* saw this heartbeat
    clock.advance(91)  # now stale: another runner takes over, the holder's next check raises
    assert other.try_acquire()
    with pytest.raises(LeaseLostError):
        holder.check()
    assert holder.lost.is_set()
    other.release()


def test_a_holder_on_another_host_is_only_stale_never_provably_dead(tmp_path, monkeypatch):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lease = StepLease(str(tmp_path / ".executor_lease"), clock=ManualClock())
    content = json.loads(lease._content())
    content.update(pid=dead.pid)
    here = StepLease._parse(json.dumps(content).encode())
    assert here.is_provably_dead()  # same host, pid gone
    monkeypatch.setenv("MARIN_HOST_ID", "host-b")  # this process now plays another host
    assert not here.is_provably_dead()
    assert json.loads(lease._content())["host"] == "host-b"


def test_the_adoption_bench_takes_over_and_continues_from_the_copied_checkpoint(gcs_server, gcs_prefix):
    from bench.lease import adoption

    result = adoption(lambda: f"gs://{gcs_server.create_bucket()}/adopt", 2, 4)
    # (the bench itself asserts the takeover wrote no checkpoint object and copied once)
    assert result["objects"] == 4 and result["takeover_with_adoption_s"] > result["adoption_copy_s"] > 0
