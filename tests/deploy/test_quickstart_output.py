"""The quickstart's terminal output: one line per unit, then a summary a person reads."""

from __future__ import annotations

import io
import json
import logging
import os
import re

import pytest

from marin_assets.execution.outcomes import ExecutionReport, StepOutcome
from marin_assets.execution.status import METADATA_FILE
from marin_assets.experiments.quickstart import build_steps
from marin_assets.experiments.quickstart_output import ProgressHandler, summary


def test_progress_handler_prints_one_line_per_finished_unit():
    stream = io.StringIO()
    logger = logging.getLogger("test.quickstart.progress")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(ProgressHandler(stream))
    logger.info("curation/raw[drop-001]: running marin_assets.transform.raw.process.run_raw -> /x")
    logger.info("curation/raw[drop-001]: SUCCESS in 9.6s")
    logger.info("experiment record: /x/experiments/q.json")
    logger.error("checkpoints/quickstart-test: FAILED after 2.0s: boom")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("done   curation/raw[drop-001] (9.6s)")
    assert "FAILED checkpoints/quickstart-test (2.0s)" in lines[1]


def test_progress_handler_reads_the_consoles_lines_of_a_real_run(prefix, tmp_path):
    """The per-unit lines it turns into ``done`` / ``FAILED`` come from the run's event stream (the
    console listener of ``executor_main``), once per unit that ran or failed."""
    from marin_assets.execution import executor_main
    from tests.dagster_bridge.run_steps import failing_family

    flag = tmp_path / "fail"
    flag.write_text("fail")
    family = failing_family(str(flag), seconds=0.2, name="qs")
    stream = io.StringIO()
    handler = ProgressHandler(stream)
    engine = logging.getLogger("marin.executor")
    level = engine.level
    engine.setLevel(logging.INFO)  # as configure_output sets it
    engine.addHandler(handler)
    try:
        with pytest.raises(SystemExit):
            executor_main(list(family.values()), argv=["--prefix", prefix, "--no_record"])
    finally:
        engine.removeHandler(handler)
        engine.setLevel(level)
    lines = stream.getvalue().splitlines()
    units = [re.match(r"^\[\s*\d+s\] (done  |FAILED) (\S+) \([\d.]+s\)$", line) for line in lines]
    done = sorted(m.group(2) for m in units if m and m.group(1) == "done  ")
    failed = [m.group(2) for m in units if m and m.group(1) == "FAILED"]
    assert (done, failed) == (["qs/root", "qs/sibling"], ["qs/bad"]), lines


def _metadata(path, values) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, METADATA_FILE), "w") as handle:
        json.dump(values, handle)


def test_summary_names_losses_bits_per_byte_lm_eval_and_where_things_are(tmp_path):
    steps = build_steps("test")
    train_out, eval_out = str(tmp_path / "checkpoints"), str(tmp_path / "evaluation")
    _metadata(
        train_out,
        {
            "initial_loss": 6.9,
            "final_loss": 5.1,
            "initial_eval_loss": 6.8,
            "eval_loss": 5.3,
            "num_train_steps": 24,
            "parameter_count": 1234,
        },
    )
    table = "| task | metric | value |\n|---|---|---|\n| marin_docstring_mc | acc | 0.31 |"
    _metadata(eval_out, {"bpb": {"heldout": 2.25}, "metrics": {"__marin_metadata_type__": "markdown", "value": table}})
    report = ExecutionReport(
        "r1",
        [
            StepOutcome(steps["train"].name, train_out, None, "ran"),
            StepOutcome(steps["evaluation"].name, eval_out, None, "ran"),
            StepOutcome("curation/raw", str(tmp_path / "raw"), "drop-001", "cached"),
        ],
    )
    text = summary(report, steps, str(tmp_path), "/home/x/.dagster_home")
    assert "2 ran, 1 cached" in text
    assert "loss 6.900 -> 5.100" in text and "eval loss 6.800 -> 5.300" in text
    assert "bits per byte: heldout 2.250" in text
    assert "| marin_docstring_mc | acc | 0.31 |" in text
    assert f"{eval_out}/results.json" in text and "DAGSTER_HOME=/home/x/.dagster_home" in text


def test_verbose_quickstart_asks_the_run_log_for_every_librarys_lines(monkeypatch):
    from marin_assets.execution.run_log import VERBOSE_ENV, verbose_requested
    from marin_assets.experiments.quickstart_output import configure_output

    # Both set and undone by monkeypatch, so configure_output's writes do not outlive the test.
    monkeypatch.setenv(VERBOSE_ENV, "0")
    monkeypatch.setenv("MARIN_DAGSTER_LOG_LEVEL", "DEBUG")
    assert not verbose_requested()
    configure_output(verbose=True)
    assert verbose_requested()
