"""Fenced outputs: a paused runner's bytes never reach an output that is (or becomes) SUCCESS.

The probe of issue 17: step ``probe/gen`` writes 4 files in 4 chunks each with plain fsspec, every
line tagged with its runner's name. Runner A is frozen (SIGSTOP) past ``stale_s`` at a chunk
boundary, runner B takes over and finishes the graph (``gen`` SUCCESS, the downstream ``use``
consumed it), then A is resumed. Tagged lines make a second writer visible even where both
would write identical content.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_status
from marin_assets.execution.storage import filesystem, join_path, read_text
from tests.execution import fencing_steps
from tests.execution.test_fencing import _events, _wait_for

REPO = Path(__file__).resolve().parents[2]
FILES, CHUNKS, LINES = 4, 4, 50
FAST = ["--heartbeat_s", "0.2", "--stale_s", "1.0"]
# (file, chunk) after which runner A is frozen: first chunk, mid-file, last chunk of a middle file.
PAUSE_POINTS = [(0, 0), (1, 2), (2, 3)]


def _runner(name: str, prefix: str, markers: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MARKER_DIR": str(markers),
        "RUNNER_NAME": name,
        "GEN_FILES": str(FILES),
        "GEN_CHUNKS": str(CHUNKS),
        "CHUNK_DELAY_S": "0.05",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.execution.fencing_steps", "gen", "--prefix", prefix, "--no_record", *FAST],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _all_files(folder: str) -> dict[str, bytes]:
    """Every file below ``folder`` (hidden ones included), read fresh."""
    fs, root = filesystem(folder)
    return {p[len(root.rstrip("/")) + 1 :]: fs.cat_file(p) for p in fs.find(root)}


def _probe(prefix: str, markers: Path, pause_at: tuple[int, int]) -> None:
    a = _runner("A", prefix, markers)
    point = ["gen", "A", str(pause_at[0]), str(pause_at[1]), str(a.pid)]
    try:
        _wait_for(lambda: point in _events(markers), 90, f"runner A to write file {pause_at[0]} chunk {pause_at[1]}")
    except AssertionError:
        a.kill()
        raise AssertionError(a.communicate()[1][-3000:]) from None
    a.send_signal(signal.SIGSTOP)
    try:
        b = _runner("B", prefix, markers)
        _, b_err = b.communicate(timeout=120)
    finally:
        a.send_signal(signal.SIGCONT)
    _, a_err = a.communicate(timeout=60)
    assert b.returncode == 0, b_err[-3000:]
    assert a.returncode != 0, "the paused runner must exit non-zero"
    assert "probe/gen" in a_err and "lost" in a_err

    steps = fencing_steps.gen()
    graph = StepGraph(steps, prefix)
    gen_out, use_out = (graph.resolved(s).output_path for s in steps)
    time.sleep(0.5)  # let anything the resumed runner still had in flight land before looking
    for out in (gen_out, use_out):
        assert read_status(out).status == "SUCCESS"
    files = {name: data for name, data in _all_files(gen_out).items() if not name.startswith(".executor_")}
    assert sorted(files) == [f"file{f}.txt" for f in range(FILES)], sorted(files)
    for f in range(FILES):
        expected = "".join(f"B file{f} chunk{c} line{k}\n" for c in range(CHUNKS) for k in range(LINES)).encode()
        assert files[f"file{f}.txt"] == expected, f"file{f}.txt holds A's bytes or is truncated"
    consumed = read_text(join_path(use_out, "consumed.txt"))
    assert consumed.count("\n") == FILES * CHUNKS * LINES and "A file" not in consumed


@pytest.mark.parametrize("pause_at", PAUSE_POINTS, ids=lambda p: f"file{p[0]}-chunk{p[1]}")
def test_paused_holder_never_reaches_a_success_output_local(prefix, tmp_path, pause_at):
    _probe(prefix, tmp_path / "markers", pause_at)


@pytest.mark.parametrize("pause_at", PAUSE_POINTS, ids=lambda p: f"file{p[0]}-chunk{p[1]}")
def test_paused_holder_never_reaches_a_success_output_gcs(gcs_prefix, tmp_path, pause_at):
    _probe(gcs_prefix, tmp_path / "markers", pause_at)
