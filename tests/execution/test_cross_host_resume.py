"""Resume across hosts under fencing: two "hosts" on one machine (``MARIN_HOST_ID``), local and gs://.

Host A's runner trains a tiny step and checkpoints; A is frozen (SIGSTOP) in the middle of writing a
checkpoint, past its lease; host B's runner takes the lease over from a holder it cannot prove dead,
copies A's attempt -- its complete checkpoints only, and its log -- continues from A's last complete
checkpoint and publishes: only whole checkpoints and the whole metric history. A, resumed (SIGCONT), keeps writing bytes tagged with a marker
for a moment -- the marker never appears in the SUCCESS output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.execution.storage import filesystem
from tests.execution import takeover_steps

REPO = Path(__file__).resolve().parents[2]
FAST = ["--heartbeat_s", "0.5", "--stale_s", "3"]


def _runner(host: str, prefix: str, tmp: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MARIN_HOST_ID": host,
        "TAKEOVER_EVENTS": str(tmp / "events.log"),
        "TAKEOVER_TAG": str(tmp / f"tag-{host}"),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.execution.takeover_steps", "--prefix", prefix, "--no_record", *FAST],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: SIGSTOP/SIGCONT reach its threads alike
    )


def _events(tmp: Path) -> list[list[str]]:
    log = tmp / "events.log"
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["local", "gcs"])
def test_a_takeover_from_a_paused_host_resumes_from_its_checkpoint_and_publishes_none_of_its_late_bytes(
    where, prefix, tmp_path, request
):
    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    (step,) = takeover_steps.steps()
    out = StepGraph([step], base).resolved(step).output_path
    a = _runner("host-a", base, tmp_path)
    b = None
    try:

        def writing_a_checkpoint() -> bool:  # A wrote a checkpoint's files, not yet its marker
            events = [e for e in _events(tmp_path) if e[1:2] == ["host-a"] and e[0] in ("writing", "ckpt")]
            return len(events) >= 10 and events[-1][0] == "writing"

        _wait_for(writing_a_checkpoint, 120, "A to write a checkpoint after 5 complete ones")
        os.killpg(a.pid, signal.SIGSTOP)  # frozen in the middle of writing that checkpoint
        time.sleep(0.1)
        k = max(int(e[2]) for e in _events(tmp_path) if e[:2] == ["ckpt", "host-a"])
        half = [int(e[2]) for e in _events(tmp_path) if e[:2] == ["writing", "host-a"]][-1]
        assert half == k + 1, "A was not frozen mid-checkpoint"

        b = _runner("host-b", base, tmp_path)
        _wait_for(lambda: any(e[:2] == ["start", "host-b"] for e in _events(tmp_path)), 120, "B to take over")
        (resumed_at,) = [int(e[2]) for e in _events(tmp_path) if e[:2] == ["start", "host-b"]]
        # B continues from a complete checkpoint of A's (copied), not from scratch: the newest one
        # whose steps A's uploaded log covers (on gs:// A may have frozen before uploading the lines
        # of its last checkpoint; B then recomputes those steps, so the history stays whole).
        assert 0 < resumed_at <= k if where == "gcs" else resumed_at == k
        print(f"{where}: A froze after checkpoint {k}; B resumed from checkpoint {resumed_at}")

        marker = f"ZOMBIE-{uuid.uuid4().hex}"
        (tmp_path / "tag-host-a").write_text(marker)
        os.killpg(a.pid, signal.SIGCONT)  # A wakes up while B trains, and writes before it notices
        a_out = a.communicate(timeout=120)[0]
        assert a.returncode != 0 and "lost" in a_out, a_out[-3000:]
        assert any(e[:2] == ["tagged", "host-a"] for e in _events(tmp_path)), (_events(tmp_path)[-30:], a_out[-3000:])

        b_out = b.communicate(timeout=180)[0]
        assert b.returncode == 0, b_out[-3000:]
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    assert read_status(out).status == "SUCCESS"
    assert read_metadata(out) == {"resumed_from_step": resumed_at, "host": "host-b"}
    fs, root = filesystem(out)
    files = {f: fs.cat_file(f) for f in fs.find(root)}
    assert not [f for f, data in files.items() if marker.encode() in data]
    steps = sorted(int(f.split("/step-")[1].split("/")[0]) for f in files if f.endswith("/metadata.json"))
    assert steps == list(range(1, 41))  # A's checkpoints up to k, then B's
    state = lambda s: files[f"{root.rstrip('/')}/checkpoints/step-{s}/state.json"]  # noqa: E731
    assert b'"host-a"' in state(1) and b'"host-b"' in state(40)
    # Only whole checkpoints were adopted: A's half-written step-(k+1) was not copied, so B's is the
    # only writer of that folder (a copied one would hold A's arrays beside B's).
    arrays = {s: sorted(f.rsplit("/", 1)[1] for f in files if f"/step-{s}/arrays/" in f) for s in steps}
    assert all(len(names) == 1 for names in arrays.values()), arrays
    assert arrays[half] == ["host-b.bin"] and arrays[resumed_at] == ["host-a.bin"]
    # The whole metric history, from the first step, from both hosts, in the published log and metrics.
    rows = [json.loads(line) for line in files[f"{root.rstrip('/')}/metrics.jsonl"].decode().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 41))
    assert {r["metrics"]["host"] for r in rows if r["step"] <= resumed_at} == {"host-a"}
    assert {r["metrics"]["host"] for r in rows if r["step"] > resumed_at} == {"host-b"}
    log_steps = [
        json.loads(line[line.index("{") :])["step"]
        for line in files[f"{root.rstrip('/')}/train.log"].decode().splitlines()
        if "json_logger" in line
    ]
    assert sorted(set(log_steps)) == list(range(1, 41))  # train.log too: every step, whoever wrote it
    # A's late writes went into its own attempt's folder, discarded: never into an output.
    assert not [f for f in files if "/.marin_attempts/" in f]
