"""A failed drop does not block later drops (issue 30.2), on the engine's chain of a
``sequential_partitions`` step -- the dedup chain's shape -- with small real steps (fast)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

import pytest

from marin_assets.execution.attempt import published_path
from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_status
from marin_assets.execution.step import ExecutorStep, output_path_of, this_output_path, this_partition, versioned
from marin_assets.execution.units import effective_predecessor, input_units
from marin_assets.execution.versioning import StepGraph


@dataclass(frozen=True)
class RawLikeConfig:
    output_path: str
    drop_id: str
    broken_list: str  # a file naming the drops that fail (not versioned: "fixing" a drop changes no hash)


def raw_like(config: RawLikeConfig) -> None:
    with open(config.broken_list) as handle:
        if config.drop_id in handle.read().split():
            raise ValueError(f"drop {config.drop_id} is broken")
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "docs.json"), "w") as handle:
        json.dump([f"{config.drop_id}-doc"], handle)


@dataclass(frozen=True)
class ChainConfig:
    input_path: str
    output_path: str
    drop_id: str
    salt: int = 0


def chain_like(config: ChainConfig) -> None:
    """Like dedup: reads the index of every earlier drop that has one, records what it saw."""
    parent = os.path.dirname(published_path(config.output_path).rstrip("/"))
    earlier = sorted(
        name
        for name in os.listdir(parent)
        if name < config.drop_id and os.path.exists(os.path.join(parent, name, "index.json"))
    )
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "index.json"), "w") as handle:
        json.dump({"against": earlier}, handle)


def _steps(broken_list: str) -> tuple[ExecutorStep, ExecutorStep]:
    raw = ExecutorStep(
        "chain/raw",
        raw_like,
        RawLikeConfig(this_output_path(), this_partition(), broken_list),
        partitioned_by="drops",
    )
    chain = ExecutorStep(
        "chain/dedup",
        chain_like,
        ChainConfig(output_path_of(raw), this_output_path(), this_partition(), versioned(1)),
        partitioned_by="drops",
        sequential_partitions=True,
    )
    return raw, chain


def _against(graph: StepGraph, step: ExecutorStep, drop: str) -> list[str]:
    path = os.path.join(graph.resolved(step).partition_output_path(drop), "index.json")
    with open(path) as handle:
        return json.load(handle)["against"]


def test_failed_drop_does_not_block_later_drops_and_rerun_is_defined(prefix, tmp_path, caplog):
    broken = tmp_path / "broken.txt"
    broken.write_text("d2\n")
    raw, chain = _steps(str(broken))
    drops = {"drops": ["d1", "d2", "d3", "d4"]}
    graph = StepGraph([chain], prefix, drops)
    caplog.set_level(logging.WARNING)
    with pytest.raises(ExecutorError) as failure:
        StepRunner(ExecutorOptions(max_concurrent=4)).run(graph)
    # The command line's summary names the failed drop (its raw step), and only it.
    assert [name for name, _, _ in failure.value.failed] == ["chain/raw[d2]"]
    assert "chain/raw[d2]" in str(failure.value) and "drop d2 is broken" in str(failure.value)
    status = lambda step, drop: read_status(graph.resolved(step).partition_output_path(drop)).status  # noqa: E731
    assert [status(chain, d) for d in ("d1", "d2", "d3", "d4")] == ["SUCCESS", "DEP_FAILED", "SUCCESS", "SUCCESS"]
    # Later drops ran against the drops that succeeded; the skip is said, naming the drop.
    assert _against(graph, chain, "d3") == ["d1"] and _against(graph, chain, "d4") == ["d1", "d3"]
    assert any("d2" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)

    # Fixed and re-run: the failed drop runs against the drops before it (by id) that succeeded;
    # the later drops' outputs stay as they were (cached: deduplicated without it).
    broken.write_text("")
    report = StepRunner(ExecutorOptions(max_concurrent=4, force_run_failed=True)).run(graph)
    actions = {(o.name, o.partition): o.action for o in report.outcomes}
    assert actions[("chain/raw", "d2")] == "ran" and actions[("chain/dedup", "d2")] == "ran"
    assert actions[("chain/dedup", "d3")] == "cached" and actions[("chain/dedup", "d4")] == "cached"
    assert _against(graph, chain, "d2") == ["d1"]
    assert _against(graph, chain, "d4") == ["d1", "d3"]  # unchanged


def test_new_drop_waits_for_a_rerun_earlier_drop_in_the_same_run(prefix, tmp_path):
    """A re-run earlier drop and a new drop in one run: the new one still sees the re-run one."""
    broken = tmp_path / "broken.txt"
    broken.write_text("d1\n")
    raw, chain = _steps(str(broken))
    graph = StepGraph([chain], prefix, {"drops": ["d1", "d2"]})
    with pytest.raises(ExecutorError):
        StepRunner(ExecutorOptions(max_concurrent=4)).run(graph)
    assert _against(graph, chain, "d2") == []
    broken.write_text("")
    later = StepGraph([chain], prefix, {"drops": ["d1", "d2", "d3"]})
    StepRunner(ExecutorOptions(max_concurrent=4, force_run_failed=True)).run(later)
    assert _against(later, chain, "d1") == [] and _against(later, chain, "d3") == ["d1", "d2"]


def test_every_earlier_drop_failed_and_bring_along(prefix, tmp_path):
    """Failed predecessors are skipped one after another; one never started is still waited for."""
    broken = tmp_path / "broken.txt"
    broken.write_text("d1 d2\n")
    raw, chain = _steps(str(broken))
    graph = StepGraph([chain], prefix, {"drops": ["d1", "d2", "d3"]})
    with pytest.raises(ExecutorError):
        StepRunner(ExecutorOptions(max_concurrent=4)).run(graph)
    assert _against(graph, chain, "d3") == []
    unit = (graph.resolved(chain), "d3")
    assert effective_predecessor(unit, graph) == (None, ["d2", "d1"])
    later = StepGraph([chain], prefix, {"drops": ["d1", "d2", "d3", "d4"]})
    fresh = (later.resolved(chain), "d4")
    # d3 succeeded: d4 waits for it; an input list without the failed drops (what Dagster brings along).
    assert input_units(fresh, later) == [(later.resolved(raw), "d4"), (later.resolved(chain), "d3")]
