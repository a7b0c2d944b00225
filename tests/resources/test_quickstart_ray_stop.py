"""The quickstart stops its embedded Ray head while the run is recorded, without ending the process.

Ray ends a process silently with status 1 when one thread calls into its core worker while another
shuts it down; the quickstart's stopper used to disconnect from a background thread while the main
thread and the progress relay's thread still used Ray (a README run exited 1 after its last step,
now and then). The driver now disconnects in the calling thread, relay first, and only the head's
processes are stopped in the background.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

pytestmark = pytest.mark.ray

SCRIPT = textwrap.dedent(
    """
    import os, sys, psutil, ray
    from marin_resources.progress import driver_relay
    from marin_resources.ray_config import RayClusterConfig
    from marin_resources.ray_connect import ensure_ray
    from marin_resources.ray_head import start_embedded_head
    from marin_assets.experiments.quickstart import RayStopper

    temp_dir = sys.argv[1]
    config = RayClusterConfig(num_cpus=1, temp_dir=temp_dir)
    start_embedded_head(config)
    ensure_ray(config)
    relay = driver_relay()
    assert relay.alive()
    stopper = RayStopper()
    stopper()  # what executor_main's first run observer call does, in the thread that ran the steps
    # Disconnected before the call returned, in this thread.
    assert not ray.is_initialized()
    stopper.finish()
    left = [p for p in psutil.process_iter(["cmdline"]) if p.pid != os.getpid() and any(temp_dir in c for c in p.info["cmdline"] or [])]
    assert left == [], left
    print("stopped cleanly")
    """
)


def test_the_stopper_disconnects_in_the_calling_thread_then_the_head_stops():
    temp_dir = tempfile.mkdtemp(prefix="mrs-", dir="/tmp")
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, temp_dir],
            env={**os.environ, "MARIN_RAY_TMPDIR": temp_dir},  # the head the quickstart stops
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        from marin_resources.ray_head import stop_embedded_head

        stop_embedded_head(temp_dir)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "stopped cleanly" in done.stdout
