"""A step's training progress lines reach the Dagster run's logs (real Dagster, real subprocess)."""

from __future__ import annotations

import json
import sys

import dagster as dg

from marin_assets.dagster_bridge.progress import with_progress_logs
from marin_assets.training import subprocess_runner


def _trainer_code() -> str:
    records = [
        json.dumps({"tracker": "json_logger", "event": "log", "step": i, "metrics": {"train": {"loss": 4.0 - i}}})
        for i in range(2)
    ]
    return "".join(f"print({r!r}, flush=True)\n" for r in records)


def test_progress_lines_of_a_subprocess_are_run_log_lines(tmp_path):
    log = tmp_path / "train.log"

    def compute(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        proc = subprocess_runner.start([sys.executable, "-c", _trainer_code()], str(log), {}, label="train")
        assert subprocess_runner.wait(proc, timeout_s=60) == 0
        return dg.MaterializeResult()

    @dg.asset(name="model")
    def model(context) -> dg.MaterializeResult:  # unannotated: Dagster cannot read a string annotation
        return with_progress_logs(compute)(context)

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([model], instance=instance)
    assert result.success
    messages = [e.user_message for e in instance.all_logs(result.run_id) if e.dagster_event is None and e.user_message]
    assert "train: step 0: loss 4" in messages and "train: step 1: loss 3" in messages, messages
