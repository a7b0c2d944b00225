"""A sick store: one that accepts connections and never answers, and one that answers 503 after a
conditional write succeeded -- real sockets on loopback (``tests/store_faults.py``) in front of, or
instead of, the repo's GCS server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_assets.execution import ExecutorStep, StepGraph, this_output_path, versioned
from marin_assets.execution.gcs import GCSLeaseBackend, StoreUnavailableError
from marin_assets.execution.reachability import StoreUnreachableError
from marin_assets.execution.runner import ExecutorOptions, StepRunner, run_steps
from marin_assets.execution.status import LEASE_FILE, read_status
from marin_assets.execution.storage import exists, join_path, storage_timeout_s
from tests.execution.sample_steps import WriteConfig, write_value
from tests.store_faults import FlakyProxy, SilentStore

REPO = Path(__file__).resolve().parents[2]


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_store_that_accepts_but_never_answers_fails_the_run_in_one_line(tmp_path, monkeypatch):
    with SilentStore() as silent:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "STORAGE_EMULATOR_HOST": silent.url,
            "FSSPEC_GCS_TOKEN": "anon",
            "MARIN_HOST_ID": "runner-host-9",
            "COUNTER_DIR": str(tmp_path),
        }
        start = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.execution.sample_steps",
                "diamond",
                "--prefix",
                "gs://b/marin",
                "--no_record",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,  # before the fix: aiohttp's 300 s, then gcsfs's retries
        )
        elapsed = time.monotonic() - start
        assert silent.accepted >= 1  # it was reached, and it did accept
        assert proc.returncode == 1
        line = _one_line(proc.stderr)
        assert "127.0.0.1 -- it accepts connections but sent no answer" in line, line
        assert f"port {silent.port}" in line and "runner-host-9" in line, line
        assert "test/a" in line and "Traceback" not in proc.stderr
        print(f"silent store: executor_main exited after {elapsed:.1f}s")

        # The same through the engine's library form.
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", silent.url)
        step = ExecutorStep("silent/a", write_value, WriteConfig(this_output_path(), versioned(1)))
        with pytest.raises(
            StoreUnreachableError, match=rf"127\.0\.0\.1 -- it accepts connections .*port {silent.port}"
        ):
            run_steps([step], "gs://b/marin")


def test_the_engines_own_store_requests_are_bounded_by_the_storage_timeout(monkeypatch):
    monkeypatch.setenv("MARIN_STORAGE_TIMEOUT_S", "0.5")
    assert storage_timeout_s() == 0.5
    with SilentStore() as silent:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", silent.url)
        backend = GCSLeaseBackend("gs://b/x/.executor_lease")
        with pytest.raises(StoreUnavailableError, match=rf"store 127\.0\.0\.1:{silent.port} did not complete a read"):
            backend.read("gs://b/x/.executor_lease")
        with pytest.raises(StoreUnavailableError, match=rf"127\.0\.0\.1:{silent.port}"):
            backend.create_exclusive("gs://b/x/.executor_lease", b"{}")


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_a_bad_storage_timeout_setting_is_refused_naming_the_variable(value, monkeypatch):
    monkeypatch.setenv("MARIN_STORAGE_TIMEOUT_S", value)
    with pytest.raises(ValueError, match="MARIN_STORAGE_TIMEOUT_S"):
        storage_timeout_s()


def test_a_503_after_a_conditional_write_landed_is_resolved_by_reading_the_object_back(
    gcs_server, gcs_prefix, monkeypatch
):
    path = join_path(gcs_prefix, "x/.executor_lease")
    with FlakyProxy(gcs_server.url, every=1) as proxy:  # every conditional write: landed, answered 503
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        backend = GCSLeaseBackend(path)
        first = backend.create_exclusive(path, b"one")
        assert first is not None and backend.read(path) == (b"one", first)
        second = backend.replace_if(path, first, b"two")
        assert second is not None and second != first and backend.read(path) == (b"two", second)
        assert backend.replace_if(path, first, b"three") is None  # a real conflict is still one (412)
        assert backend.create_exclusive(path, b"four") is None
        assert backend.read(path) == (b"two", second)
        assert backend.delete_if(path, second)
        assert backend.read(path) is None
        assert proxy.injected == 3  # create, replace, delete: each landed and was answered 503


def _race_steps(counter: str) -> list[ExecutorStep]:
    return [
        ExecutorStep(f"flaky/s{i}", write_value, WriteConfig(this_output_path(), versioned(i), counter_dir=counter))
        for i in range(3)
    ]


@pytest.mark.timeout(240)
def test_two_runners_through_a_store_that_answers_503_after_writes_land_compute_each_step_once(
    gcs_server, gcs_prefix, tmp_path
):
    counter = tmp_path / "counter"
    with FlakyProxy(gcs_server.url, every=4) as proxy:  # every 4th lease/status write: landed, 503
        env = {**os.environ, "PYTHONPATH": str(REPO), "STORAGE_EMULATOR_HOST": proxy.url, "COUNTER_DIR": str(counter)}
        runner = [sys.executable, "-m", "tests.execution.test_store_faults", "--prefix", gcs_prefix]
        runner += ["--heartbeat_s", "0.3", "--stale_s", "3", "--no_record"]
        procs = [
            subprocess.Popen(runner, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)
        ]
        outputs = [p.communicate(timeout=200)[0] for p in procs]
        injected = proxy.injected
    assert injected >= 3, injected  # the fault happened, on both runners' writes
    assert [p.returncode for p in procs] == [0, 0], outputs
    lines = (counter / "calls.log").read_text().splitlines()
    assert Counter(line.split()[0].rsplit("-", 1)[0] for line in lines) == {"s0": 1, "s1": 1, "s2": 1}
    graph = StepGraph(_race_steps(str(counter)), gcs_prefix)
    for node in graph.topological():
        assert read_status(node.output_path).status == "SUCCESS"
        assert not exists(join_path(node.output_path, LEASE_FILE))  # released, none left behind
        assert "lost" not in "".join(outputs), outputs


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_store_that_stops_answering_mid_step_fails_it_in_one_line_and_the_next_runner_takes_over(
    gcs_server, gcs_prefix, tmp_path, monkeypatch
):
    monkeypatch.setenv("MARIN_STORAGE_TIMEOUT_S", "1")
    marker = tmp_path / "hang"
    with FlakyProxy(gcs_server.url) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
        step = ExecutorStep(
            "hang/a", _hang_then_write, _HangConfig(this_output_path(), versioned(1), str(marker), proxy.url)
        )
        graph = StepGraph([step], gcs_prefix)
        out = graph.resolved(step).output_path
        _HANG[proxy.url] = proxy
        start = time.monotonic()
        with pytest.raises(Exception) as failure:
            StepRunner(ExecutorOptions(heartbeat_s=0.5, stale_s=3)).run(graph)
        elapsed = time.monotonic() - start
        message = str(failure.value)
        assert "store 127.0.0.1 does not answer" in message and f"port {proxy.port}" in message, message
        assert "hang/a" in message
        print(f"store stopped answering mid-step: the run failed after {elapsed:.1f}s: {message}")
        proxy.silent = False  # the store is back
        assert read_status(out).status == "RUNNING"  # not recorded while the store was silent
        report = StepRunner(ExecutorOptions(heartbeat_s=0.5, stale_s=3)).run(graph)
    assert [o.action for o in report.outcomes] == ["ran"]
    assert read_status(out).status == "SUCCESS"


_HANG: dict[str, FlakyProxy] = {}


@dataclass(frozen=True)
class _HangConfig:
    output_path: str
    value: int
    marker: str
    proxy: str


def _hang_then_write(config: _HangConfig) -> dict[str, int]:
    """First call: the store stops answering, then the step writes (and fails). Later calls write."""
    from marin_assets.execution.storage import atomic_write_text

    if not os.path.exists(config.marker):
        Path(config.marker).write_text("hung once")
        _HANG[config.proxy].silent = True
    atomic_write_text(join_path(config.output_path, "value.json"), json.dumps({"value": config.value}))
    return {"value": config.value}


if __name__ == "__main__":
    from marin_assets.execution import executor_main

    executor_main(_race_steps(os.environ.get("COUNTER_DIR", "")), argv=sys.argv[1:])
