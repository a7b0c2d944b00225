"""``marin/ran_on`` says where a step's shard tasks ran (``shard_nodes``: Ray node id -> shard tasks),
on a real local Ray: for a step launched as a Ray task (its shards fan out from there) and for a step
run in process whose shards an explicit Ray pool sends to Ray."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

pytestmark = pytest.mark.ray


def _shard_node(index: int) -> tuple[int, str]:
    import ray

    return index, ray.get_runtime_context().get_node_id()


@dataclass(frozen=True)
class Shards:
    count: int
    output_path: str = ""
    ray_pool: bool = False  # an explicit Ray shard pool (else the one the engine chose)


def _mapping_step(config: Shards) -> dict:
    """A step that maps its shards and reports what the shards saw."""
    from marin_assets.core.shard_stage import ShardPool, map_shards

    pool = ShardPool("ray") if config.ray_pool else None
    results = map_shards(_shard_node, [(i,) for i in range(config.count)], pool)
    return {"indices": [i for i, _ in results], "seen_nodes": sorted({n for _, n in results})}


@pytest.mark.timeout(180)
def test_a_step_on_ray_records_the_nodes_its_shards_ran_on(ray_head):
    import ray

    from marin_resources.ray_jobs import PLACEMENT_KEY, SHARD_NODES_KEY, recording_placement

    result = ray.get(ray.remote(recording_placement(_mapping_step)).remote(Shards(5)), timeout=120)
    # map_shards still returns the shards' own results, in input order.
    assert result["indices"] == [0, 1, 2, 3, 4]
    (node,) = result["seen_nodes"]
    placement = result[PLACEMENT_KEY]
    assert placement["ray_node_id"] == node
    assert placement[SHARD_NODES_KEY] == {node: 5}


@pytest.mark.timeout(180)
def test_a_step_without_shards_on_ray_records_no_shard_nodes(ray_head):
    import ray

    from marin_resources.ray_jobs import PLACEMENT_KEY, SHARD_NODES_KEY, recording_placement

    result = ray.get(ray.remote(recording_placement(_mapping_step)).remote(Shards(0)), timeout=120)
    assert SHARD_NODES_KEY not in result[PLACEMENT_KEY]


@pytest.mark.timeout(180)
def test_an_in_process_step_whose_shards_ran_on_ray_records_their_nodes(ray_head, prefix):
    import ray

    from marin_assets.execution import ExecutorStep, run_steps, this_output_path
    from marin_assets.execution.status import read_metadata
    from marin_resources.ray_jobs import PLACEMENT_KEY, SHARD_NODES_KEY

    step = ExecutorStep("shards/in_process", _mapping_step, Shards(3, this_output_path(), ray_pool=True))
    (outcome,) = run_steps([step], prefix).outcomes
    assert outcome.action == "ran", outcome
    placement = read_metadata(outcome.output_path)[PLACEMENT_KEY]
    # The step itself ran on no Ray node: only its shards did.
    assert placement == {SHARD_NODES_KEY: {ray.get_runtime_context().get_node_id(): 3}}
