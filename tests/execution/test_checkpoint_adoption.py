"""Takeover adopts only what is whole; a step's log lives with its attempt; lease-loss messages say
what was observed. (The end-to-end freeze-and-take-over runs are in test_cross_host_resume.py.)"""

from __future__ import annotations

import json
import os
import time

import pytest

from marin_assets.execution.attempt import copy_attempt, drop_incomplete_checkpoints, incomplete_checkpoints
from marin_assets.execution.fence import LeaseLostError
from marin_assets.execution.lease import StepLease
from marin_assets.execution.storage import filesystem, read_bytes
from marin_assets.training.training_log import START_MARK, AttemptLog, resumed_from_step, uncovered_checkpoints
from tests.manual_clock import ManualClock


class _NoFence:
    def check(self) -> None:
        pass


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(text)


CHECKPOINTS = {
    "checkpoints/step-20/metadata.json": "{}",
    "checkpoints/step-20/model/0.0": "a",
    "checkpoints/step-40/model/0.0": "half",  # arrays written, marker not yet
    "checkpoints/run-x/step-60/opt/0": "half",  # one level deeper (a per-run folder)
    "hf/step-40/config.json": "{}",  # an HF export is no Levanter checkpoint
    "train.log": "history",
}


def test_incomplete_checkpoints_are_those_without_levanters_marker():
    assert incomplete_checkpoints(list(CHECKPOINTS)) == {"checkpoints/step-40", "checkpoints/run-x/step-60"}


def test_a_copy_from_a_live_holder_leaves_unfinished_checkpoints_out(tmp_path):
    source, dest = tmp_path / "a", tmp_path / "b"
    _write(source, CHECKPOINTS)
    copied = copy_attempt(str(source), str(dest), _NoFence())
    found = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert found == ["checkpoints/step-20/metadata.json", "checkpoints/step-20/model/0.0", "hf/step-40/config.json",
                     "train.log"]  # fmt: skip
    assert copied == 4


def test_an_attempt_adopted_in_place_drops_its_unfinished_checkpoints(tmp_path):
    _write(tmp_path, CHECKPOINTS)
    assert sorted(drop_incomplete_checkpoints(str(tmp_path))) == ["checkpoints/run-x/step-60", "checkpoints/step-40"]
    assert (tmp_path / "checkpoints/step-20/model/0.0").exists() and not (tmp_path / "checkpoints/step-40").exists()


def test_resumed_from_step_is_the_checkpoint_levanter_loaded_in_the_last_run():
    # As Levanter 1.2 logs it (levanter.checkpoint, levanter.main.train_lm); step-40 was unfinished.
    log = (
        f"{START_MARK} 1\nINFO :: Loading checkpoint from /o/checkpoints/step-10\nResuming training from step 11\n"
        f"{START_MARK} 2\nINFO :: Discovered latest checkpoint from /o/checkpoints at /o/checkpoints/step-20\n"
        "INFO :: Loading checkpoint from /o/checkpoints/step-20\nINFO :: Resuming training from step 21\n"
    )
    assert resumed_from_step(log) == 20
    assert resumed_from_step(log + f"{START_MARK} 3\nfresh start\n") == 0
    assert resumed_from_step(f"{START_MARK} 4\nResuming training from step 7\n") == 7


def test_the_log_of_an_attempt_on_gs_continues_the_copied_history_and_is_synced(gcs_prefix):
    out = f"{gcs_prefix}/train-abc"
    fs, root = filesystem(out)
    fs.pipe_file(f"{root}/train.log", b"line from host A\n")  # the attempt's log, as copied at a takeover
    with AttemptLog(out, sync_s=60) as log:
        assert not log.path.startswith(root)  # a local mirror: objects cannot be appended to
        with open(log.path, "a") as handle:
            handle.write("line from host B\n")
        log.sync()
        assert read_bytes(f"{out}/train.log") == b"line from host A\nline from host B\n"
        with open(log.path, "a") as handle:
            handle.write("last line\n")
    assert read_bytes(f"{out}/train.log").endswith(b"last line\n")  # uploaded when the block ends
    assert not os.path.exists(log.path)


def test_lease_loss_messages_say_what_was_observed(tmp_path):
    clock = ManualClock()
    path = str(tmp_path / ".executor_lease")
    holder = StepLease(path, heartbeat_s=30, stale_s=90, clock=clock)
    assert holder.try_acquire()
    os.remove(path)  # nobody took it over: the file is gone
    with pytest.raises(LeaseLostError, match="the lease file was deleted"):
        holder.verify()
    assert "another runner" not in holder.lost_reason
    holder.release()

    first = StepLease(path, heartbeat_s=30, stale_s=90, clock=clock)
    assert first.try_acquire()
    first._stop.set()  # frozen
    first._thread.join()
    second = StepLease(path, heartbeat_s=30, stale_s=90, clock=clock)
    assert not second.try_acquire()  # first sight of this heartbeat: stale only 90 s from now
    clock.advance(91)
    assert second.try_acquire()
    with pytest.raises(LeaseLostError, match=r"another runner took it over \(owner \w+ on host"):
        first.check()
    second.release()


def _metric(step: int) -> str:
    return json.dumps({"tracker": "json_logger", "event": "log", "step": step, "metrics": {"train/loss": 1.0}}) + "\n"


def test_a_copied_log_that_stops_before_the_newest_checkpoint_drops_that_checkpoint(gcs_prefix):
    # Host A uploaded its log through step 3, then checkpointed step 5 and froze before the next
    # upload: resuming from step-5 would publish a history without steps 4-5.
    out = f"{gcs_prefix}/train-abc"
    fs, root = filesystem(out)
    fs.pipe_file(f"{root}/train.log", "".join(_metric(s) for s in (1, 2, 3)).encode())
    for step in (2, 5):
        fs.pipe_file(f"{root}/checkpoints/step-{step}/arrays/a.bin", b"x")
        fs.pipe_file(f"{root}/checkpoints/step-{step}/metadata.json", b"{}")
    assert uncovered_checkpoints(read_bytes(f"{out}/train.log").decode(), {2, 5}) == [5]
    with AttemptLog(out, sync_s=60):
        pass
    assert fs.exists(f"{root}/checkpoints/step-2/metadata.json")  # covered: resumed from
    assert not fs.exists(f"{root}/checkpoints/step-5/metadata.json")  # not covered: recomputed


def test_the_log_on_gs_is_uploaded_as_soon_as_a_checkpoint_completes(gcs_prefix):
    out = f"{gcs_prefix}/train-def"
    fs, root = filesystem(out)
    with AttemptLog(out, sync_s=3600, poll_s=0.1) as log:  # the timer alone would not upload for an hour
        with open(log.path, "a") as handle:
            handle.write(_metric(1))
        fs.pipe_file(f"{root}/checkpoints/step-1/metadata.json", b"{}")  # Levanter's marker, written last
        deadline = time.monotonic() + 60
        while b'"step": 1' not in (read_bytes(f"{out}/train.log") or b""):
            assert time.monotonic() < deadline, "the log was not uploaded after the checkpoint completed"
            time.sleep(0.05)
