"""A watched landing zone as an observable asset: its drops and their status, without opening a tick.

``landing/<source>`` (group ``landing``) is an observable source asset whose observations carry a
table with one row per drop folder: ``valid``, ``incomplete``, ``rejected`` (with the reason), or
``processed`` (valid, and every asset of its drop job is materialized for it). Observations come
from the ``landing_status`` sensor (running by default; it records a zone only when its table
changed, hashing only drops not processed yet, so a drop whose checksums fail reads "rejected"
as it does for the landing sensor) and from *Observe* in the UI (every drop's checksums). The
zone's logic lives in ``landing/zone.py``; this is glue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import dagster as dg

from marin_assets.dagster_bridge.cursors import dump_cursor, load_cursor
from marin_assets.execution.executor_main import default_prefix
from marin_assets.landing.zone import STATUS_VALID, LandingDrops, drop_sort_key, scan_source, validate_drop

SENSOR_NAME = "landing_status"
STATUS_PROCESSED = "processed"
_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("drop", "string"),
        dg.TableColumn("status", "string", description="valid | incomplete | rejected | processed"),
        dg.TableColumn("reason", "string", description="why a drop is rejected"),
        dg.TableColumn("files", "int"),
        dg.TableColumn("path", "string"),
    ]
)


def landing_key(source: str) -> dg.AssetKey:
    """The asset key of the landing zone of ``source``."""
    return dg.AssetKey(["landing", source.replace("-", "_").replace(".", "_")])


def drop_rows(
    instance: dg.DagsterInstance,
    prefix: str,
    source: str | LandingDrops,
    local_keys: Sequence[dg.AssetKey],
    verify: bool,
) -> list[dict[str, object]]:
    """One row per drop folder of ``source`` (a name below ``<prefix>/landing``, or the declared
    :class:`LandingDrops`); a valid drop every drop-job asset holds is ``processed``."""
    drops = source if isinstance(source, LandingDrops) else LandingDrops(f"landing/{source}")
    processed: set[str] | None = None
    for key in local_keys:
        done = set(instance.get_materialized_partitions(key))
        processed = done if processed is None else processed & done
    rows = []
    for drop in sorted(
        scan_source(drops.folder(prefix), drops.source, verify_checksums=verify), key=lambda d: drop_sort_key(d.drop_id)
    ):
        status, reason = drop.status, drop.reason
        if status == STATUS_VALID and processed is not None and drop.drop_id in processed:
            status = STATUS_PROCESSED
        elif status == STATUS_VALID and not verify:
            # Not processed: its checksums decide, so a drop the landing sensor rejects never reads "valid".
            status, reason, _ = validate_drop(drop.path, drop.drop_id, verify_checksums=True)
        files = drop.manifest.get("files", []) if isinstance(drop.manifest, dict) else []
        rows.append(
            {
                "drop": drop.drop_id,
                "status": status,
                "reason": reason,
                "files": len(files) if isinstance(files, list) else 0,
                "path": drop.path,
            }
        )
    return rows


def rows_metadata(rows: list[dict[str, object]]) -> dict[str, dg.MetadataValue]:
    """The drop table plus a count per status (``rejected`` first in the UI's eyes)."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
    meta: dict[str, dg.MetadataValue] = {
        "drops": dg.MetadataValue.table([dg.TableRecord(row) for row in rows], schema=_SCHEMA),
    }
    for status in ("rejected", "incomplete", "valid", STATUS_PROCESSED):
        meta[f"count/{status}"] = dg.MetadataValue.int(counts.get(status, 0))
    rejected = [f"{row['drop']}: {row['reason']}" for row in rows if row["status"] == "rejected"]
    if rejected:
        meta["rejected"] = dg.MetadataValue.md("\n".join(f"- {line}" for line in rejected))
    return meta


def _version(rows: list[dict[str, object]]) -> str:
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def landing_zone_asset(drops: LandingDrops, set_name: str, local_keys: Sequence[dg.AssetKey]) -> dg.SourceAsset:
    """The observable asset of a declared landing zone (*Observe* verifies checksums)."""
    source = drops.source

    @dg.observable_source_asset(
        key=landing_key(source),
        group_name="landing",
        description=f"The drops of <prefix>/landing/{source}/ (partition set '{set_name}') with their status: "
        "valid, incomplete, rejected (and why) or processed. The landing_status sensor records every change.",
    )
    def _observe(context: dg.AssetExecutionContext) -> dg.ObserveResult:
        rows = drop_rows(context.instance, default_prefix(), drops, local_keys, verify=True)
        return dg.ObserveResult(data_version=dg.DataVersion(_version(rows)), metadata=rows_metadata(rows))

    return _observe


def build_landing_status_sensor(
    zones: Sequence[tuple[LandingDrops, str, Sequence[dg.AssetKey]]], minimum_interval_seconds: int = 30
) -> dg.SensorDefinition:
    """A sensor recording each landing zone's drop table when it changed (cursor: source -> version)."""

    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Records the drops of each watched landing zone, with their status, as observations "
        "of landing/<source> (see the asset's metadata table).",
    )
    def _landing_status(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        state = load_cursor(context.cursor)
        events = []
        for drops, _, local_keys in zones:
            source = drops.source
            try:
                rows = drop_rows(context.instance, default_prefix(), drops, local_keys, verify=False)
            except Exception as exc:  # noqa: BLE001 - a storage hiccup must not kill the sensor
                context.log.warning(f"landing/{source}: listing failed: {type(exc).__name__}: {exc}")
                continue
            version = _version(rows)
            if state.get(source) != version:
                events.append(dg.AssetObservation(asset_key=landing_key(source), metadata=rows_metadata(rows)))
                state[source] = version
        if not events:
            return dg.SkipReason("no landing zone changed")
        return dg.SensorResult(asset_events=events, cursor=dump_cursor(state))

    return _landing_status
