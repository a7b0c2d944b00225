"""Leases do not trust wall clocks across hosts: two runners whose wall clocks disagree by an hour.

Each runner gets its own clock (the lease's clock injection): its wall clock ``skew_s`` off the
other's, its own monotonic clock (which starts anywhere: never compared either). Time moves by
``ManualClock.advance`` -- the default 30 s / 90 s timing, no sleeping.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from marin_assets.execution.lease import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S, StepLease
from tests.manual_clock import ManualClock

REPO = Path(__file__).resolve().parents[2]


class HostClock:
    """One host's clocks over a shared :class:`ManualClock`: its wall clock ``skew_s`` off, and a
    monotonic clock with an origin of its own."""

    def __init__(self, base: ManualClock, skew_s: float, monotonic_origin: float) -> None:
        self.base = base
        self.skew_s = skew_s
        self.monotonic_origin = monotonic_origin

    def time(self) -> float:
        return self.base.time() + self.skew_s

    def monotonic(self) -> float:
        return self.base.monotonic() - self.monotonic_origin

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return self.base.wait(event, seconds)

    def starting(self, thread: threading.Thread) -> None:
        self.base.starting(thread)


@pytest.mark.parametrize("holder_skew_s, observer_skew_s", [(-3600, 0), (3600, 0), (0, 3600), (0, -3600)])
def test_a_clock_an_hour_off_cannot_take_a_live_lease_and_still_takes_a_stale_one(
    holder_skew_s, observer_skew_s, tmp_path
):
    base = ManualClock()
    path = str(tmp_path / ".executor_lease")
    holder = StepLease(path, clock=HostClock(base, holder_skew_s, monotonic_origin=1e6))
    observer = StepLease(path, clock=HostClock(base, observer_skew_s, monotonic_origin=-5e5))
    assert holder.try_acquire()
    assert observer.is_held_by_other() and not observer.try_acquire()
    for _ in range(4):  # the holder is alive: an hour of skew either way never makes it look stale
        base.advance(DEFAULT_STALE_S / 2)
        assert not observer.try_acquire() and observer.is_held_by_other()
    assert holder.holder().seq > 1 and not holder.lost.is_set()
    # The holder freezes: its heartbeat stops. Stale after stale_s of the *observer's* clock.
    holder._stop.set()
    holder._thread.join()
    assert not observer.try_acquire()
    base.advance(DEFAULT_STALE_S - DEFAULT_HEARTBEAT_S)  # a heartbeat could still have come
    assert not observer.try_acquire()
    base.advance(DEFAULT_HEARTBEAT_S + 1)  # unchanged for more than stale_s since the observer saw it
    assert observer.try_acquire()
    assert observer.holder().owner == observer.owner and observer.took_over_live_holder
    observer.release()


def test_a_lease_left_long_ago_by_another_host_is_taken_after_stale_s_of_watching(tmp_path):
    base = ManualClock()
    path = str(tmp_path / ".executor_lease")
    gone = StepLease(path, clock=HostClock(base, -86400, monotonic_origin=0))  # a day behind, then gone
    assert gone.try_acquire()
    gone._stop.set()
    gone._thread.join()
    newcomer = StepLease(path, clock=HostClock(base, 0, monotonic_origin=0))
    assert not newcomer.try_acquire()  # the timestamp says "a day old"; it is not believed
    base.advance(DEFAULT_STALE_S + 1)
    assert newcomer.try_acquire()
    newcomer.release()


# A runner whose wall clock (``time.time``, everywhere in its process) is ``argv[1]`` seconds off.
_SKEWED_RUNNER = (
    "import runpy, sys, time; skew = float(sys.argv.pop(1)); wall = time.time; "
    "time.time = lambda: wall() + skew; "
    "runpy.run_module('tests.execution.sample_steps', run_name='__main__', alter_sys=True)"
)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "skew_a, skew_b", [(-3600, 0), (0, 3600)], ids=["holder-an-hour-behind", "taker-an-hour-ahead"]
)
def test_two_runners_an_hour_apart_compute_a_step_once(skew_a, skew_b, prefix, tmp_path):
    markers = tmp_path / "markers"

    def runner(host: str, skew: float) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": str(REPO), "MARIN_HOST_ID": host, "MARKER_DIR": str(markers)}
        env["CHUNKS"] = "60"  # 6 s of work: B arrives while A computes
        args = ["slow", "--prefix", prefix, "--heartbeat_s", "0.5", "--stale_s", "3", "--no_record"]
        return subprocess.Popen(
            [sys.executable, "-c", _SKEWED_RUNNER, str(skew), *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    a = runner("host-a", skew_a)
    b = None
    try:
        deadline = time.monotonic() + 120
        while not (markers.exists() and any(markers.iterdir())):
            assert time.monotonic() < deadline and a.poll() is None, "A did not start its step"
            time.sleep(0.05)
        b = runner("host-b", skew_b)
        outputs = [a.communicate(timeout=180)[0], b.communicate(timeout=180)[0]]
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [a.returncode, b.returncode] == [0, 0], outputs
    assert len(list(markers.iterdir())) == 1, outputs  # computed once: B never took A's live lease
    assert "took over" not in "".join(outputs) and "lost" not in "".join(outputs), outputs
