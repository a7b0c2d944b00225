"""The incrementality contract of the quickstart: a new drop costs only itself.

After the quickstart ran over drop-001..003, adding drop-004 runs only drop-004's units (raw,
text, quality, dedup, consolidated, its tokenized cache) plus what must see every drop (training
and evaluation). The classifier and the tokenizer keep their versions; no earlier drop is
re-scored, re-consolidated or re-tokenized. The dry run says so, naming the root cause first.

The finished quickstart is produced by the real runner (status, info and lease files exactly as
a real run writes them) with a launcher that skips the step bodies: the contract is about what
the planner and runner decide, and two real quickstart runs (Levanter training included) would
cost over ten minutes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from marin_assets.execution.dry_run import format_plan, plan
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_info
from marin_assets.execution.step import versioned
from marin_assets.execution.versioning import ResolvedStep, StepGraph
from marin_assets.experiments import curation, quickstart, quickstart_steps
from marin_assets.experiments.curation import PARTITION_SET
from marin_assets.experiments.curation_pipeline import curation_steps

REPO = Path(__file__).resolve().parents[2]
DROPS = ["drop-001", "drop-002", "drop-003"]
NEW = "drop-004"
PER_DROP_ROLES = ("raw", "text", "quality", "dedup", "consolidated", "tokenized")


def _skip_body(node: ResolvedStep, config: Any) -> dict[str, Any]:
    return {}


def _roots(steps: dict[str, Any]) -> list[Any]:
    return [steps["evaluation"], *(steps[role] for role in curation.STEPS)]


def _finished_quickstart(prefix: str, steps: dict[str, Any]) -> StepGraph:
    """The runner's view of a finished quickstart over DROPS under ``prefix``."""
    graph = StepGraph(_roots(steps), prefix, {PARTITION_SET: DROPS})
    report = StepRunner(ExecutorOptions(max_concurrent=1), launch=_skip_body).run(graph)
    assert report.by_action("ran") and not report.failed
    return graph


@pytest.fixture()
def finished(tmp_path) -> tuple[str, dict[str, Any], StepGraph]:
    prefix = str(tmp_path / "prefix")
    steps = quickstart.build_steps("test")
    return prefix, steps, _finished_quickstart(prefix, steps)


def _label(unit: Any) -> tuple[str, str | None]:
    return (unit.name, unit.partition)


def test_new_drop_plans_only_its_units_and_what_needs_every_drop(finished):
    prefix, steps, before = finished
    after = StepGraph(_roots(steps), prefix, {PARTITION_SET: [*DROPS, NEW]})
    planned = plan(after)
    to_run = {_label(p) for p in planned if p.action == "run"}
    expected = {(steps[role].name, NEW) for role in PER_DROP_ROLES}
    expected |= {(steps["train"].name, None), (steps["evaluation"].name, None)}
    assert to_run == expected, format_plan(planned)
    assert all(p.action == "skip" for p in planned if _label(p) not in expected)
    # Neither the classifier nor the tokenizer moves: same version, same path.
    for role in ("quality_training_set", "quality_model", "tokenizer", "heldout"):
        assert after.resolved(steps[role]).output_path == before.resolved(steps[role]).output_path, role
    # Figures reported in the issue: 8 of 31 units run (it was 20 of 30 when the classifier read every drop).
    assert (len(to_run), len(planned)) == (8, 31)


def test_dry_run_names_the_root_cause_first(finished):
    prefix, steps, _ = finished
    planned = {_label(p): p for p in plan(StepGraph(_roots(steps), prefix, {PARTITION_SET: [*DROPS, NEW]}))}
    tokenized, train, evaluation = (steps[r].name for r in ("tokenized", "train", "evaluation"))
    cause = f"new partition {NEW} of {tokenized} consumed by {train}"
    assert planned[(train, None)].reason.startswith(cause)
    assert planned[(train, None)].changes == [cause]
    assert planned[(evaluation, None)].reason.startswith(f"{cause} (via dependency {train})")
    assert planned[(evaluation, None)].changes == [f"{cause} (via dependency {train})"]
    assert planned[(tokenized, NEW)].reason.startswith(f"new partition {NEW} of {tokenized}")


def test_config_change_is_the_only_difference_shown(finished, monkeypatch):
    prefix, steps, before = finished
    size = quickstart_steps.SIZES["test"]
    lr = size.train.learning_rate.value  # versioned: it enters the train step's hash
    changed = dataclasses.replace(size, train=dataclasses.replace(size.train, learning_rate=versioned(lr / 3)))
    monkeypatch.setitem(quickstart_steps.SIZES, "test", changed)
    new_steps = quickstart.build_steps("test")
    planned = {_label(p): p for p in plan(StepGraph(_roots(new_steps), prefix, {PARTITION_SET: DROPS}))}
    train, evaluation = new_steps["train"].name, new_steps["evaluation"].name
    assert {k for k, p in planned.items() if p.action == "run"} == {(train, None), (evaluation, None)}
    (train_cause,) = planned[(train, None)].changes
    assert train_cause.startswith("config.") and f"learning_rate: {lr!r} -> {lr / 3!r}" in train_cause
    assert planned[(train, None)].reason.startswith(train_cause)
    # One line, no repr-vs-object or tuple-vs-list noise about the (unchanged) model config.
    assert planned[(evaluation, None)].changes == [f"{train} {train_cause} (via dependency {train})"]
    # What was stored is the canonical form: read back, it equals the freshly computed version.
    info = read_info(before.resolved(steps["train"]).output_path)
    assert info["version"] == before.resolved(steps["train"]).version


def test_new_drop_does_not_change_curation_of_earlier_drops(tmp_path):
    prefix = str(tmp_path / "prefix")
    steps = curation_steps("landing/sample-html")
    roots = list(steps.values())
    graph = StepGraph(roots, prefix, {PARTITION_SET: DROPS})
    StepRunner(ExecutorOptions(max_concurrent=1), launch=_skip_body).run(graph)
    grown = StepGraph(roots, prefix, {PARTITION_SET: [*DROPS, NEW]})
    planned = plan(grown)
    assert {_label(p) for p in planned if p.action == "run"} == {
        (steps[r].name, NEW) for r in ("raw", "text", "quality", "dedup", "consolidated")
    }


def test_retraining_on_drops_is_an_explicit_config_change(tmp_path):
    prefix = str(tmp_path / "prefix")
    default = curation_steps("landing/sample-html")
    pinned = curation_steps("landing/sample-html", classifier_negative_drops=("drop-001",))

    def model(steps: dict[str, Any], drops: list[str]) -> ResolvedStep:
        return StepGraph(list(steps.values()), prefix, {PARTITION_SET: drops}).resolved(steps["quality_model"])

    # Pinning drops is a new version (an explicit re-train) ...
    assert model(default, DROPS).hash != model(pinned, DROPS).hash
    # ... reading exactly the pinned drop; new drops change neither classifier.
    assert model(pinned, DROPS).hash == model(pinned, [*DROPS, NEW]).hash
    assert model(default, DROPS).hash == model(default, [*DROPS, NEW]).hash
    training_set = StepGraph(list(pinned.values()), prefix, {PARTITION_SET: DROPS}).resolved(
        pinned["quality_training_set"]
    )
    assert [k for k in training_set.version["config"] if k.startswith("negative_drop_paths")]
    assert "drop-001" in json.dumps(training_set.version["config"])


def test_cli_dry_run_prints_the_plan(finished):
    prefix, _, _ = finished
    env = {**os.environ, "PYTHONPATH": str(REPO), "MARIN_RUN_OBSERVERS": ""}
    env.pop("DAGSTER_HOME", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "marin_assets.experiments.quickstart",
            "--size",
            "test",
            "--prefix",
            prefix,
            "--dry_run",
            "--partitions",
            f"{PARTITION_SET}={','.join([*DROPS, NEW])}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dry run: 23 skip, 8 run" in proc.stdout, proc.stdout
    assert f"new partition {NEW} of tokenized/quickstart-test consumed by checkpoints/quickstart-test" in proc.stdout
