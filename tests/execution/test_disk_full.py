"""Disk full on a real small tmpfs (mounted here; skipped where mounting is not permitted).

Mid-step (the step fills the disk) and before start (the disk is full already), then space freed:
FAILED is recorded, errors are the engine's one line (no traceback on the console), the re-run is
exact, and no temporary file (``.tmp-lease-*``, ``.tmp-*``) stays in any output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_metadata, read_status
from tests.execution import diskfull_steps

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SmallDisk:
    """A mounted tmpfs."""

    path: Path

    def resize(self, mb: int) -> None:
        """Grow (or shrink) it: space freed."""
        subprocess.run(["mount", "-o", f"remount,size={mb}m", str(self.path)], check=True)


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, unmounted at the end."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield SmallDisk(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _run(prefix: str, *extra: str, mb: int = 8) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "FILL_MB": str(mb)}
    return subprocess.run(
        [sys.executable, "-m", "tests.execution.diskfull_steps", "--prefix", prefix, "--no_record", *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _temporary_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.startswith((".tmp-lease-", ".tmp-"))]


def _output(prefix: str, mb: int = 8) -> str:
    os.environ["FILL_MB"] = str(mb)
    try:
        (step,) = diskfull_steps.steps()
    finally:
        del os.environ["FILL_MB"]
    return StepGraph([step], prefix).resolved(step).output_path


@pytest.mark.timeout(300)
def test_disk_full_mid_step_records_failed_and_the_rerun_after_freeing_space_is_exact(small_disk):
    prefix = str(small_disk.path / "p")
    out = _output(prefix)
    first = _run(prefix)
    assert first.returncode == 1, first.stderr[-3000:]
    assert "Traceback" not in first.stderr, first.stderr[-3000:]
    assert "No space left on device" in first.stderr
    status = read_status(out)
    assert status is not None and status.status == "FAILED" and "No space left on device" in status.error
    assert _temporary_files(small_disk.path) == []

    small_disk.resize(32)  # space freed
    second = _run(prefix, "--force_run_failed", "true")
    assert second.returncode == 0, second.stderr[-3000:]
    assert read_status(out).status == "SUCCESS" and read_metadata(out) == {"mb": 8}
    assert os.path.getsize(os.path.join(out, "data.bin")) == 8 << 20
    assert _temporary_files(small_disk.path) == []
    assert not (small_disk.path / "p" / ".marin_attempts").exists()  # nothing half-written left beside it


@pytest.mark.timeout(300)
def test_disk_full_before_start_is_one_line_and_the_rerun_succeeds(small_disk):
    prefix = str(small_disk.path / "p")
    filler = small_disk.path / "filler"
    with open(filler, "wb") as handle, pytest.raises(OSError):
        while True:
            handle.write(b"\0" * (1 << 16))
            handle.flush()
    first = _run(prefix, mb=1)
    assert first.returncode == 1
    errors = [line for line in first.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "no step started" in errors[0], first.stderr
    assert "Traceback" not in first.stderr
    assert _temporary_files(small_disk.path) == []

    filler.unlink()  # space freed
    second = _run(prefix, mb=1)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads(second.stdout.strip().splitlines()[-1])
    assert summary["ran"] == 1
    out = _output(prefix, mb=1)
    assert read_status(out).status == "SUCCESS" and os.path.getsize(os.path.join(out, "data.bin")) == 1 << 20
    assert _temporary_files(small_disk.path) == []
