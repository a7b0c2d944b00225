"""A command-line run's log file names outputs by their published path, never a staging folder."""

from __future__ import annotations

import logging

from marin_assets.execution.attempt import relocate_any_staging, staging_path
from marin_assets.execution.run_log import RunLog


def test_any_staging_folder_becomes_its_output_and_lookalikes_stay():
    out = "gs://bucket/p/train-0d5904"
    staged = staging_path(out, "e88d1116")
    assert ".marin_attempts" in staged
    text = f"saving to {staged}/checkpoints/step-2; other /x/.marin_attempts/a-1/zz/a-12 kept"
    assert relocate_any_staging(text) == (
        "saving to gs://bucket/p/train-0d5904/checkpoints/step-2; other /x/.marin_attempts/a-1/zz/a-12 kept"
    )


def test_the_run_log_file_rewrites_library_records_and_failure_traces(tmp_path):
    out = str(tmp_path / "prefix" / "tok-1ea6e8")
    staged = staging_path(out, "abc123")
    log = RunLog(str(tmp_path / "logs" / "run.log"), console=None)
    log.attach()
    try:
        logging.getLogger("levanter.checkpoint").warning("Saving checkpoint to %s/step-3", staged)
        log.write_failures([("tok", out, f"Traceback\nOSError: {staged}/cache missing")])
    finally:
        log.close()
    text = (tmp_path / "logs" / "run.log").read_text()
    assert f"Saving checkpoint to {out}/step-3" in text
    assert f"OSError: {out}/cache missing" in text
    assert ".marin_attempts" not in text
