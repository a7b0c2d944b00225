"""A partition set (the drops) as an observed external asset: what a new drop changes shows in the UI.

Code versions leave the drop set out (``unit_run.code_version_of``), so adding a drop needs no
*Reload definitions*; the drop set lives in data versions instead. Each partition set is an
external asset ``partition_sets/<name>`` whose data version is a hash of its sorted keys. Steps
that read every partition (training on every drop's cache) depend on it, so when a drop is added
Dagster shows them -- and what follows them -- as *unsynced: upstream data changed*, until they
are materialized over the new set.

Observations come from the ``partition_sets`` sensor (running by default, it only reads the
instance's partition keys; a tick records a set only when its keys changed) and from *Observe*
in the UI. A consumer materialized within one sensor interval after a partition was added shows
unsynced until its next (cached) materialization: Dagster records the input data versions a run
started with.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from marin_assets.dagster_bridge.cursors import dump_cursor, load_cursor
from marin_assets.dagster_bridge.dagster_internals import DATA_VERSION_TAG
from marin_assets.execution.versioning import hash_version

SENSOR_NAME = "partition_sets"


def partition_set_key(name: str) -> dg.AssetKey:
    """The asset key standing for a partition set."""
    return dg.AssetKey(["partition_sets", name])


def partition_set_version(keys: Sequence[str]) -> str:
    """The data version of a partition set: a hash of its sorted keys."""
    return hash_version({"partitions": sorted(keys)})


def observation(name: str, keys: Sequence[str]) -> dg.AssetObservation:
    """An observation of the partition set ``name`` holding ``keys``."""
    keys = sorted(keys)
    return dg.AssetObservation(
        asset_key=partition_set_key(name),
        # How Dagster's own observable source assets record a data version.
        tags={DATA_VERSION_TAG: partition_set_version(keys)},
        metadata={"partitions": dg.MetadataValue.json(keys), "count": dg.MetadataValue.int(len(keys))},
    )


def partition_set_assets(names: Sequence[str]) -> list[dg.SourceAsset]:
    """One observable source asset per partition set (*Observe* in the UI records its keys too)."""

    def build(name: str) -> dg.SourceAsset:
        @dg.observable_source_asset(
            key=partition_set_key(name),
            description=f"The keys of the '{name}' partition set; its data version is a hash of them. "
            "Steps that read every partition depend on it, so a new partition marks them unsynced.",
            group_name="partition_sets",
        )
        def _observe(context: dg.AssetExecutionContext) -> dg.ObserveResult:
            keys = sorted(context.instance.get_dynamic_partitions(name))
            return dg.ObserveResult(
                data_version=dg.DataVersion(partition_set_version(keys)),
                metadata={"partitions": dg.MetadataValue.json(keys), "count": dg.MetadataValue.int(len(keys))},
            )

        return _observe

    return [build(name) for name in sorted(names)]


def build_partition_set_sensor(names: Sequence[str], minimum_interval_seconds: int = 30) -> dg.SensorDefinition:
    """A sensor that observes each partition set when its keys change (cursor: name -> version)."""
    names = sorted(names)

    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Records the partition sets (drops) as observations whose data version changes with their keys.",
    )
    def _observe(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        state = load_cursor(context.cursor)
        events = []
        for name in names:
            keys = sorted(context.instance.get_dynamic_partitions(name))
            version = partition_set_version(keys)
            if state.get(name) != version:
                events.append(observation(name, keys))
                state[name] = version
        if not events:
            return dg.SkipReason("no partition set changed")
        return dg.SensorResult(asset_events=events, cursor=dump_cursor(state))

    return _observe
