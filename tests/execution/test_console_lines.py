"""The units' console lines (``running``, ``SUCCESS in``, ``FAILED after``) come from the run's event
stream, written by the command line's console listener (``execution/console.py``) and by nothing
else: a run without it writes none; ``executor_main`` writes each once per unit, into the run's log
file too, a unit that could not start included."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from marin_assets.execution import executor_main
from marin_assets.execution.console import ConsoleProgress
from marin_assets.execution.events import Done, Failed, Started, StepEvent
from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.versioning import StepGraph
from tests.dagster_bridge.run_steps import failing_family

UNIT_LINE = re.compile(r"^(?P<unit>\S+): (?P<kind>running|SUCCESS in|FAILED after)\b")


def unit_lines(records: list[logging.LogRecord]) -> list[tuple[str, str, logging.LogRecord]]:
    """(unit, kind, record) of every unit line among ``records``."""
    found = []
    for record in records:
        match = UNIT_LINE.match(record.getMessage())
        if match:
            found.append((match.group("unit"), match.group("kind"), record))
    return found


def kinds_by_unit(records: list[logging.LogRecord]) -> dict[str, list[str]]:
    by_unit: dict[str, list[str]] = {}
    for unit, kind, _ in unit_lines(records):
        by_unit.setdefault(unit, []).append(kind)
    return by_unit


def test_a_run_without_the_console_writes_no_unit_line(prefix, tmp_path, caplog):
    flag = tmp_path / "fail"
    flag.write_text("fail")
    family = failing_family(str(flag), seconds=0.2, name="quiet")
    heard: list[StepEvent] = []  # list.append is thread-safe
    with caplog.at_level(logging.INFO), pytest.raises(ExecutorError):
        StepRunner(ExecutorOptions(listeners=(heard.append,))).run(StepGraph(list(family.values()), prefix))
    assert unit_lines(caplog.records) == []
    # The stream itself told every start and end.
    assert sum(isinstance(e, Started) for e in heard) == 3
    assert sum(isinstance(e, Done) for e in heard) == 2
    assert sum(isinstance(e, Failed) for e in heard) == 1


def test_the_console_writes_each_units_lines_once_from_its_events(prefix, tmp_path, caplog):
    flag = tmp_path / "fail"
    flag.write_text("fail")
    family = failing_family(str(flag), seconds=0.2, name="loud")
    argv = ["--prefix", prefix, "--no_record"]
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit) as exited:
        executor_main(list(family.values()), argv=argv)
    assert exited.value.code == 1
    assert kinds_by_unit(caplog.records) == {
        "loud/root": ["running", "SUCCESS in"],
        "loud/sibling": ["running", "SUCCESS in"],
        "loud/bad": ["running", "FAILED after"],
        # child and grandchild were not run (their input failed): no line of their own
    }
    # Written by the console's listener, on the engine's logger; the wording is the engine's.
    for _, _, record in unit_lines(caplog.records):
        assert record.name == "marin.executor" and Path(record.pathname).name == "console.py", record
    lines = {record.getMessage() for _, _, record in unit_lines(caplog.records)}
    (running,) = [line for line in lines if line.startswith("loud/root: running")]
    root_out = StepGraph(list(family.values()), prefix).resolved(family["root"]).output_path
    assert re.fullmatch(
        rf"loud/root: running tests\.dagster_bridge\.run_steps\.nap -> {root_out} \(attempt \w+\)", running
    )
    (failed,) = [line for line in lines if "FAILED after" in line]
    assert re.fullmatch(r"loud/bad: FAILED after \d+\.\ds: planned failure of bad", failed), failed
    assert any(re.fullmatch(r"loud/sibling: SUCCESS in \d+\.\ds", line) for line in lines), lines
    # The run's log file keeps the same lines.
    (log,) = Path(prefix, "experiments", "logs").glob("*.log")
    text = log.read_text()
    for line in lines:
        assert text.count(line) == 1, line

    # Again, refusing FAILED steps: the refused unit fails without running -- one FAILED line,
    # saying why; the others are cached (no line).
    caplog.clear()
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit):
        executor_main(list(family.values()), argv=[*argv, "--force_run_failed", "false"])
    assert kinds_by_unit(caplog.records) == {"loud/bad": ["FAILED after"]}
    ((_, _, refused),) = unit_lines(caplog.records)
    assert refused.levelno == logging.ERROR
    assert "previous run FAILED" in refused.getMessage() and "--force_run_failed" in refused.getMessage()
    assert not refused.getMessage().startswith("loud/bad: FAILED after 0.0s: loud/bad")  # named once


def test_console_lines_of_events_given_by_hand(caplog):
    """What a front end hands the console (no run): partition in the label, a cause without the unit's name."""
    console = ConsoleProgress()
    with caplog.at_level(logging.INFO, logger="marin.executor"):
        console(Started("raw", "d1", "/out/raw-1", fn="m.f", attempt="a1"))
        console(Done("raw", "d1", "/out/raw-1", action="cached"))
        console(Done("raw", "d1", "/out/raw-1", action="ran", seconds=2.0))
        console(Failed("tok", None, "/out/tok-1", seconds=1.0, cause="tok: lease on /out/tok-1 was lost (taken over)"))
        console(Failed("ev", None, "/out/ev-1", seconds=3.0, cause="boom", error="ev failed: exited 1; log x:\nboom"))
    assert [r.getMessage() for r in caplog.records] == [
        "raw[d1]: running m.f -> /out/raw-1 (attempt a1)",
        "raw[d1]: SUCCESS in 2.0s",
        "tok: FAILED after 1.0s: lease on /out/tok-1 was lost (taken over)",
        "ev: FAILED after 3.0s: exited 1; log x:\nboom",
    ]
