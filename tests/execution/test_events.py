"""The engine's one event stream (``execution/events.py``): what listeners passed in
``ExecutorOptions.listeners`` hear, in which order, with which fields; a listener that fails
breaks neither the run nor the other listeners; the console's progress cadence."""

from __future__ import annotations

import logging
import threading

import pytest

from marin_assets.execution import ExecutorStep, StepGraph, this_output_path, versioned
from marin_assets.execution.console import PROGRESS_EVERY_ENV, ConsoleProgress, progress_cadence_from_env
from marin_assets.execution.events import Done, Failed, NotRun, Progress, Started, StepEvent
from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_resources.progress import PROGRESS_LOGGER, report_progress
from tests.dagster_bridge.run_steps import failing_family


class Heard:
    """A listener that keeps every event (thread-safe: units run in threads)."""

    def __init__(self) -> None:
        self.events: list[StepEvent] = []
        self.lock = threading.Lock()

    def __call__(self, event: StepEvent) -> None:
        with self.lock:
            self.events.append(event)

    def of(self, step: str) -> list[StepEvent]:
        return [e for e in self.events if e.step == step]


def talk(config: dict) -> dict:
    report_progress("step 1: loss 2.5", {"step": 1.0, "train/loss": 2.5})
    print(f"hello from {config['who']}")
    report_progress("step 2: loss 2.0", {"step": 2.0, "train/loss": 2.0})
    return {"said": 2}


def _run(steps, prefix, *listeners, **options):
    graph = StepGraph(steps, prefix)
    return StepRunner(ExecutorOptions(listeners=tuple(listeners), **options)).run(graph)


def test_a_steps_events_come_in_order_with_their_fields(prefix, capsys):
    heard = Heard()
    step = ExecutorStep("talk/one", talk, {"output_path": this_output_path(), "who": versioned("one")})
    report = _run([step], prefix, heard)
    out = report.outcomes[0].output_path
    kinds = [(type(e).__name__, getattr(e, "stream", None)) for e in heard.events]
    assert kinds == [
        ("Started", None),
        ("Progress", "progress"),
        ("Progress", "stdout"),
        ("Progress", "progress"),
        ("Done", None),
    ]
    started, first, printed, _, done = heard.events
    assert isinstance(started, Started) and started.where and started.output_path == out
    assert isinstance(first, Progress) and first.message == "step 1: loss 2.5"
    assert dict(first.metrics) == {"step": 1.0, "train/loss": 2.5}
    assert isinstance(printed, Progress) and printed.message == "hello from one"
    assert isinstance(done, Done) and done.action == "ran" and done.seconds > 0
    # The step's metadata (and the last progress line's summary) travel with Done.
    assert done.metadata["said"] == 2 and done.metadata["marin/progress"] == "step 2: loss 2.0"
    assert all(e.step == "talk/one" and e.partition is None for e in heard.events)
    assert [e.at for e in heard.events] == sorted(e.at for e in heard.events)
    # The printed line is still printed, once.
    assert capsys.readouterr().out.count("hello from one") == 1
    # A second run finds it cached: one Done, nothing started.
    again = Heard()
    _run([step], prefix, again)
    assert [(type(e).__name__, getattr(e, "action", None)) for e in again.events] == [("Done", "cached")]


def test_a_failure_is_failed_with_its_cause_and_its_descendants_not_run(prefix, tmp_path):
    flag = tmp_path / "fail"
    flag.write_text("fail")
    family = failing_family(str(flag), seconds=0.2, name="events")
    heard = Heard()
    with pytest.raises(ExecutorError) as raised:
        _run(list(family.values()), prefix, heard)
    (failed,) = [e for e in heard.events if isinstance(e, Failed)]
    assert failed.step == "events/bad" and failed.seconds >= 0
    assert failed.cause == "events/bad failed: planned failure of bad" and failed.error.endswith(failed.cause)
    assert [type(e).__name__ for e in heard.of("events/bad")] == ["Started", "Failed"]
    (child,) = heard.of("events/child")
    assert isinstance(child, NotRun) and child.action == "dep_failed" and child.cause == "input events/bad failed"
    (grandchild,) = heard.of("events/grandchild")
    assert isinstance(grandchild, NotRun) and grandchild.cause == "input events/child failed"
    for name in ("root", "sibling"):
        assert [type(e).__name__ for e in heard.of(f"events/{name}")] == ["Started", "Done"]
    # The run's report is fed by the same stream: one outcome per unit.
    actions = {o.name: o.action for o in raised.value.report.outcomes}
    assert actions == {
        "events/root": "ran",
        "events/sibling": "ran",
        "events/bad": "failed",
        "events/child": "dep_failed",
        "events/grandchild": "dep_failed",
    }


def test_a_listener_that_fails_breaks_neither_the_run_nor_the_others(prefix, caplog):
    def broken(event: StepEvent) -> None:
        raise RuntimeError("front end down")

    heard = Heard()
    steps = [
        ExecutorStep(f"talk/s{i}", talk, {"output_path": this_output_path(), "who": versioned(f"s{i}")})
        for i in range(2)
    ]
    with caplog.at_level(logging.ERROR, logger="marin_assets.execution.events"):
        report = _run(steps, prefix, broken, heard)
    assert sorted(o.action for o in report.outcomes) == ["ran", "ran"]
    assert len([e for e in heard.events if isinstance(e, Done)]) == 2
    assert len([e for e in heard.events if isinstance(e, Progress)]) == 6
    assert any("front end down" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_the_consoles_cadence_keeps_every_nth_step_and_lines_without_a_step(caplog):
    console = ConsoleProgress(every_steps=10)

    def line(step: float | None, text: str) -> Progress:
        return Progress("train", None, "/out", message=text, metrics={} if step is None else {"step": step})

    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        for i in range(1, 31):
            console(line(i, f"train: step {i}"))
        console(line(None, "mmlu | acc | 0.25"))
        console(Progress("train", None, "/out", message="printed", stream="stdout"))
    shown = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    assert shown == ["train: step 10", "train: step 20", "train: step 30", "mmlu | acc | 0.25"]


def test_the_consoles_cadence_in_seconds_and_from_the_environment(monkeypatch, caplog):
    console = ConsoleProgress(every_s=60)
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        for i in range(5):
            console(Progress("a", None, "/a", message=f"a {i}", metrics={"step": float(i)}, at=1000.0 + i))
        console(Progress("b", None, "/b", message="b 0", metrics={"step": 0.0}, at=1001.0))
        console(Progress("a", None, "/a", message="a 99", metrics={"step": 99.0}, at=1061.0))
    assert [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER] == ["a 0", "b 0", "a 99"]
    monkeypatch.setenv(PROGRESS_EVERY_ENV, "10,30s")
    parsed = progress_cadence_from_env()
    assert (parsed.every_steps, parsed.every_s) == (10, 30.0)
    monkeypatch.setenv(PROGRESS_EVERY_ENV, "often")
    with pytest.raises(ValueError, match=PROGRESS_EVERY_ENV):
        progress_cadence_from_env()


def _judge(config: dict) -> dict:
    from marin_resources.runtime_env import split_secret_env_vars

    _, secrets = split_secret_env_vars({"env_vars": {"PLAIN_LOOKING": "x", "OTHER": "y", "HF_TOKEN": "z"}})
    return {"kept_out": sorted(secrets)}


def test_the_runs_secret_rule_travels_in_its_options_to_the_launch(prefix):
    step = ExecutorStep("judge/one", _judge, {"output_path": this_output_path()})
    default = _run([step], prefix).outcomes[0].metadata
    assert default == {"kept_out": ["HF_TOKEN"]}  # the one rule (secret_rule.is_secret_name)
    strict = _run([step], prefix + "/strict", secret_name_rule=lambda name: name == "PLAIN_LOOKING")
    assert strict.outcomes[0].metadata == {"kept_out": ["PLAIN_LOOKING"]}
