"""What the quickstart prints: one progress line per unit, then a short summary a person reads.

Without ``-v`` the engine's per-unit log lines become one line each (``done`` / ``FAILED``, with
seconds), Ray's forwarded worker logs and Dagster's DEBUG event log are off, and warnings and errors
still show. ``-v`` keeps every log line (the engine's INFO, Dagster's DEBUG, Ray's worker output).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import Any

from marin_assets.execution.outcomes import ExecutionReport
from marin_assets.execution.run_log import VERBOSE_ENV
from marin_assets.execution.status import read_metadata
from marin_assets.execution.step import ExecutorStep

_UNIT_DONE = re.compile(r"^(?P<label>\S+): (?P<what>SUCCESS in|FAILED after) (?P<seconds>[\d.]+)s")


class ProgressHandler(logging.Handler):
    """Turns the engine's ``<unit>: SUCCESS in Ns`` / ``FAILED after Ns`` records into one line each."""

    def __init__(self, stream: Any = None) -> None:
        super().__init__(level=logging.INFO)
        self.stream = stream or sys.stdout
        self.start = time.monotonic()
        self.done = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match = _UNIT_DONE.match(message)
        if match:
            self.done += 1
            status = "done  " if match.group("what").startswith("SUCCESS") else "FAILED"
            line = (
                f"[{time.monotonic() - self.start:6.0f}s] {status} {match.group('label')} ({match.group('seconds')}s)"
            )
        elif record.levelno >= logging.WARNING:
            line = f"{record.levelname.lower()}: {message}"
        else:
            return
        print(line, file=self.stream, flush=True)


class RayNoiseFilter(logging.Filter):
    """Drops what Ray prints in the driver at INFO (connecting, connected) and two warnings it gives
    on every run of this engine: ``ray.init`` from a step thread ("SIGTERM handler is not set") and
    a task-id query in the driver. Other warnings and errors pass."""

    NOISE = ("SIGTERM handler is not set", "only available when the process is a worker")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        return not any(noise in message for noise in self.NOISE)


# Ray sets the level of its "ray" logger in every ray.init, so the filter sits on the loggers that
# emit the records (filters of a parent logger do not see its children's records).
RAY_DRIVER_LOGGERS = ("ray._private.worker", "ray.runtime_context", "ray.worker")


def configure_output(verbose: bool) -> None:
    """Progress lines instead of log records, and quiet Ray/Dagster, unless ``verbose``."""
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        os.environ.setdefault("MARIN_DAGSTER_LOG_LEVEL", "DEBUG")
        # The run's console filter passes third-party INFO lines (alembic, SQLAlchemy) only then.
        os.environ[VERBOSE_ENV] = "1"
        return
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    engine = logging.getLogger("marin.executor")
    engine.setLevel(logging.INFO)
    engine.propagate = False
    engine.addHandler(ProgressHandler())
    for name in RAY_DRIVER_LOGGERS:
        logging.getLogger(name).addFilter(RayNoiseFilter())
    # Read by marin_resources.ray_connect (worker output) and the Dagster recording (event log).
    os.environ.setdefault("MARIN_RAY_LOG_TO_DRIVER", "0")
    os.environ.setdefault("MARIN_DAGSTER_LOG_LEVEL", "WARNING")


def _plain(value: Any) -> Any:
    """A metadata value without its ``execution.metadata`` marker (markdown tables stay text)."""
    return value.get("value") if isinstance(value, dict) and "value" in value else value


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _output_path(report: ExecutionReport, step: ExecutorStep) -> str | None:
    return next((o.output_path for o in report.outcomes if o.name == step.name and o.partition is None), None)


def what_ran(report: ExecutionReport) -> str:
    """The units this run computed, by kind: ``curation 17 (3 drops), tokenizers 1, ...``."""
    groups: dict[str, int] = {}
    drops: dict[str, set[str]] = {}
    for outcome in report.by_action("ran"):
        group = outcome.name.split("/", 1)[0]
        groups[group] = groups.get(group, 0) + 1
        if outcome.partition is not None:
            drops.setdefault(group, set()).add(outcome.partition)
    parts = [
        f"{group} {count}" + (f" ({len(drops[group])} drops)" if group in drops else "")
        for group, count in groups.items()
    ]
    return ", ".join(parts) or "nothing (every unit was cached)"


def summary(
    report: ExecutionReport,
    steps: Mapping[str, ExecutorStep],
    prefix: str,
    dagster_home: str | None,
    elapsed_s: float | None = None,
) -> str:
    """The closing summary: what ran, losses, bits per byte, the lm-eval table, where things are."""
    counts = {a: len(report.by_action(a)) for a in ("ran", "cached", "waited")}
    took = f" in {elapsed_s:.0f} s" if elapsed_s is not None else ""
    lines = [
        "",
        f"Quickstart finished{took}.",
        f"  units: {counts['ran']} ran, {counts['cached']} cached, {counts['waited']} computed by another run",
        f"  ran: {what_ran(report)}",
    ]
    train_path = _output_path(report, steps["train"])
    train = read_metadata(train_path) if train_path else {}
    if train:
        lines.append(
            f"  train: loss {_fmt(train.get('initial_loss'))} -> {_fmt(train.get('final_loss'))}, "
            f"eval loss {_fmt(train.get('initial_eval_loss'))} -> {_fmt(train.get('eval_loss'))} "
            f"({train.get('num_train_steps')} steps, {train.get('parameter_count')} parameters)"
        )
    eval_path = _output_path(report, steps["evaluation"])
    evaluation = read_metadata(eval_path) if eval_path else {}
    if evaluation:
        bpb = evaluation.get("bpb") or {}
        if bpb:
            lines.append(
                "  bits per byte: " + ", ".join(f"{name} {_fmt(value)}" for name, value in sorted(bpb.items()))
            )
        table = _plain(evaluation.get("metrics"))
        if isinstance(table, str) and table.strip():
            lines.append("  lm-eval:")
            lines += [f"    {row}" for row in table.strip().splitlines()]
    lines.append(f"  outputs: {prefix}")
    if train_path and eval_path:
        lines.append(f"    model {train_path}/hf, evaluation {eval_path}/results.json")
    ui_url = os.environ.get("MARIN_UI_URL")
    if ui_url:  # a deployed webserver (scripts/local_deploy.sh env, Kubernetes): it already shows this run
        lines.append(f"  UI: {ui_url}  (recorded in the instance at DAGSTER_HOME={dagster_home})")
    elif dagster_home:
        lines.append(
            f"  UI: DAGSTER_HOME={dagster_home} .venv/bin/dagster dev -w workspace.yaml  (http://127.0.0.1:3000)"
        )
    return "\n".join(lines)
