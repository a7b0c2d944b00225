"""Progress of training and evaluation subprocesses: the runner's follower turns metric records of the
log into short lines, printed (the Ray task's log) and logged to ``marin.progress`` (the Dagster run's
logs), while the log file stays complete."""

from __future__ import annotations

import json
import logging
import sys

from marin_assets.training import subprocess_runner
from marin_assets.training.subprocess_runner import progress_metrics, progress_of
from marin_resources.progress import PROGRESS_LOGGER, PROGRESS_MARK


def _record(step: int, metrics: dict) -> str:
    return "INFO levanter " + json.dumps({"tracker": "json_logger", "event": "log", "step": step, "metrics": metrics})


def test_progress_of_metric_records_and_lm_eval_rows():
    line = _record(20, {"train": {"loss": 5.8213}, "throughput": {"tokens_per_second": 7012.4}})
    assert progress_of(line) == "step 20: loss 5.821, tokens/s 7012"
    line = _record(
        21, {"train": {"loss": 4.5}, "throughput": {"tokens_per_second": 201560.0, "mfu": 18.04, "duration": 0.3221}}
    )
    assert progress_of(line) == "step 21: loss 4.5, tokens/s 201560, MFU % 18.04, step s 0.3221"
    assert progress_metrics(line) == {
        "step": 21.0,
        "train/loss": 4.5,
        "throughput/tokens_per_second": 201560.0,
        "throughput/mfu": 18.04,
        "throughput/duration": 0.3221,
    }
    assert progress_metrics("WARNING something") == {}
    line = _record(40, {"eval": {"loss": 5.47, "heldout": {"bpb": 3.2}}})
    assert progress_of(line) == "step 40: eval/loss 5.47, eval/heldout/bpb 3.2"
    summary = json.dumps({"tracker": "json_logger", "event": "summary", "metrics": {"parameter_count": 1}})
    assert progress_of(summary) is None
    assert progress_of("|marin_docstring_mc|      1|none  |     0|acc   |↑  |0.25|±  |0.0443|") == (
        "marin_docstring_mc | 1 | none | 0 | acc | ↑ | 0.25 | ± | 0.0443"
    )
    assert progress_of("|---|---:|---|") is None
    assert progress_of("Running loglikelihood requests:  45%|####5     | 9/20") is None
    assert progress_of("WARNING something") is None


def test_a_subprocess_progress_is_logged_not_printed_outside_ray_while_its_log_stays_whole(tmp_path, capsys, caplog):
    lines = [_record(i, {"train": {"loss": 9.0 - i}}) for i in range(3)] + ["plain output line"]
    code = "import sys, time\n" + "".join(f"print({line!r}, flush=True); time.sleep(0.2)\n" for line in lines)
    log = tmp_path / "train.log"
    log.write_text("an earlier attempt's line: " + _record(99, {"train": {"loss": 1.0}}) + "\n")
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        proc = subprocess_runner.start([sys.executable, "-c", code], str(log), {}, label="train")
        assert subprocess_runner.wait(proc, timeout_s=60) == 0
    expected = [f"train: step {i}: loss {9.0 - i:g}" for i in range(3)]
    assert [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER] == expected
    # Outside a Ray worker nothing is printed: a command line's console keeps one line per unit.
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(PROGRESS_MARK)]
    assert printed == []
    text = log.read_text()
    assert all(line in text for line in lines)
    assert not [r for r in caplog.records if r.name == PROGRESS_LOGGER and "step 99" in r.getMessage()]


def test_a_training_subprocess_progress_carries_its_numbers_to_progress_sinks(tmp_path):
    """tokens/s, MFU and step time reach a front end as numbers (``ProgressEvent.metrics``)."""
    from marin_resources.progress import progress_sink

    line = _record(
        7, {"train": {"loss": 3.5}, "throughput": {"tokens_per_second": 1000.0, "mfu": 41.5, "duration": 0.5}}
    )
    seen = []
    with progress_sink(seen.append):
        proc = subprocess_runner.start([sys.executable, "-c", f"print({line!r})"], str(tmp_path / "t.log"), {}, "train")
        assert subprocess_runner.wait(proc, timeout_s=60) == 0
    assert [(e.line, e.metrics["throughput/mfu"], e.metrics["throughput/duration"]) for e in seen] == [
        ("train: step 7: loss 3.5, tokens/s 1000, MFU % 41.5, step s 0.5", 41.5, 0.5)
    ]
