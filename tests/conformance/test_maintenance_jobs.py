"""``invalidate_step_job`` and ``gc_job`` in a real Dagster instance: dry run first, then apply."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from marin_assets.definitions import build_definitions
from tests.conformance.marin_import import run_marin_script


def run_job(name: str, prefix: str, op: str, config: dict) -> dg.ExecuteInProcessResult:
    defs = build_definitions([])
    job = defs.get_job_def(name)
    with dg.instance_for_test() as instance:
        return job.execute_in_process(
            run_config={
                "ops": {op: {"config": config}},
                "resources": {"marin_storage": {"config": {"prefix": prefix}}},
            },
            instance=instance,
        )


def output_metadata(result: dg.ExecuteInProcessResult) -> dict:
    """The metadata the single op attached to its output."""
    for event in result.all_node_events:
        if event.event_type_value == "STEP_OUTPUT":
            return dict(event.event_specific_data.metadata)
    raise AssertionError("no output event")


def test_invalidate_and_gc_jobs(prefix):
    assert run_marin_script("hello_world", prefix).returncode == 0
    status = Path(prefix, "hello_world/stats-8118f4/.executor_status")
    dry = run_job("invalidate_step_job", prefix, "invalidate_step", {"step": "hello_world/data"})
    assert dry.success
    targets = output_metadata(dry)["targets"].value
    assert any(t.endswith("hello_world/stats-8118f4") for t in targets)
    assert status.exists()  # a dry run changes nothing
    applied = run_job("invalidate_step_job", prefix, "invalidate_step", {"step": "hello_world/data", "apply": True})
    assert applied.success
    assert not status.exists() and Path(prefix, "hello_world/stats-8118f4/stats.json").exists()

    from tests.conformance.test_invalidate_gc import dagster_only_output

    kept = Path(dagster_only_output(prefix))  # a step of the code location, materialized from Dagster
    kept.mkdir(parents=True)
    (kept / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))
    stale = Path(prefix, "old/step-abcdef")
    stale.mkdir(parents=True)
    (stale / ".executor_status").write_text(json.dumps({"status": "SUCCESS", "time": 0}))
    listed = run_job("gc_job", prefix, "gc_outputs", {})
    assert listed.success and output_metadata(listed)["unreferenced"].value == [str(stale)]
    assert stale.exists()
    assert run_job("gc_job", prefix, "gc_outputs", {"apply": True}).success
    assert not stale.exists() and kept.exists()
    assert Path(prefix, "hello_world/data-bd4f05/numbers.json").exists()
