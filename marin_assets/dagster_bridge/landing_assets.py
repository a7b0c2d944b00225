"""A watched landing zone as an observable asset: its drops and their status, without opening a tick.

``landing/<source>`` (group ``landing``) is an observable source asset whose observations carry a
table with one row per drop folder: ``valid``, ``incomplete``, ``rejected`` (with the reason),
``failed`` (its latest run failed), ``processed`` (valid, and every asset of its drop job is
materialized for it; the reason names files its raw step rejected whole) or ``changed after
processing`` (a processed drop whose files changed since: flagged by a warning and the failing
landing check ``drops_unchanged_after_processing``, never processed again). Observations come
from the ``landing_status`` sensor (running by default; it records a zone only when its table
changed, hashing only drops not processed yet, so a drop whose checksums fail reads "rejected"
as it does for the landing sensor) and from *Observe* in the UI (every drop's checksums). The
zone's logic lives in ``landing/zone.py``; this is glue.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.cursors import compact_ids, dump_cursor, expand_ids, load_cursor, mapping
from marin_assets.dagster_bridge.dagster_internals import PARTITION_NAME_TAG
from marin_assets.dagster_bridge.landing_sensor import RUN_TAG
from marin_assets.execution.storage import join_path, read_many
from marin_assets.landing.zone import (
    MANIFEST,
    REJECTED_FILES,
    STATUS_VALID,
    LandingDrops,
    content_fingerprint,
    drop_sort_key,
    list_drop_folders,
    manifest_fingerprint,
    read_manifest,
    scan_source,
    validate_drop,
)
from marin_resources.dagster_resources import MarinStorageResource

SENSOR_NAME = "landing_status"
STATUS_PROCESSED = "processed"
STATUS_FAILED = "failed"
STATUS_CHANGED = "changed after processing"
CHANGED_CHECK = "drops_unchanged_after_processing"
FAILED_CHECK = "no_failed_drops"
RECHECK_PER_TICK = 100
FP = 10  # hex characters of a fingerprint kept per processed drop in the sensor's cursor
"""Processed drops whose content the ``landing_status`` sensor checks again per tick (round robin)."""
PROCESSED_ROWS_SHOWN = 500
"""The table shows every drop not processed, and the latest processed ones up to this many."""
_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("drop", "string"),
        dg.TableColumn(
            "status",
            "string",
            description="valid | incomplete | rejected | failed | processed | changed after processing",
        ),
        dg.TableColumn("reason", "string", description="why a drop is rejected, failed or flagged"),
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
    state: dict[str, Any] | None = None,
) -> list[dict[str, object]]:
    """One row per drop folder of ``source`` (a name below ``<prefix>/landing``, or the declared
    :class:`LandingDrops`); a valid drop every drop-job asset holds is ``processed``, one whose
    latest run failed (and is not processed) ``failed``. ``state``: see :func:`zone_rows`."""
    drops = source if isinstance(source, LandingDrops) else LandingDrops(f"landing/{source}")
    processed: set[str] | None = None
    for key in local_keys:
        done = set(instance.get_materialized_partitions(key))
        processed = done if processed is None else processed & done
    failed = failed_runs(instance, drops.source)
    notes = lambda drop: rejected_files_note(instance, local_keys, drop)  # noqa: E731
    return zone_rows(drops.folder(prefix), drops.source, processed, verify, state, failed, notes)


def rejected_files_note(instance: dg.DagsterInstance, keys: Sequence[dg.AssetKey], drop: str) -> str:
    """The one-line reasons of the files of a processed drop that its raw step rejected whole ("" when
    none), from the ``rejected_files`` metadata of the drop's latest materialization."""
    for key in keys:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, asset_partitions=[drop]), limit=1
        ).records
        materialization = records[0].asset_materialization if records else None
        value = materialization.metadata.get(REJECTED_FILES) if materialization is not None else None
        if value is not None:
            files = value.value if isinstance(value.value, list) else []
            return "; ".join(f"file rejected: {line}" for line in files)
    return ""


def failed_runs(instance: dg.DagsterInstance, source: str) -> dict[str, str]:
    """Drop -> id of its latest failed run, for the runs of ``source``'s drops (sensor or UI)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(tags={RUN_TAG: source}, statuses=[dg.DagsterRunStatus.FAILURE]), limit=1000
    )
    out: dict[str, str] = {}
    for run in runs:  # newest first
        drop = run.tags.get("marin/drop") or run.tags.get(PARTITION_NAME_TAG)
        if drop:
            out.setdefault(drop, run.run_id)
    return out


def _row(drop: str, status: str, reason: str, files: int, path: str) -> dict[str, object]:
    return {"drop": drop, "status": status, "reason": reason, "files": files, "path": path}


def zone_rows(
    folder: str,
    source: str,
    processed: set[str] | None,
    verify: bool,
    state: dict[str, Any] | None = None,
    failed: dict[str, str] | None = None,
    notes: Callable[[str], str] | None = None,
) -> list[dict[str, object]]:
    """The drop table of one source's folder.

    ``notes(drop)``: the reason column of a processed drop (the files its raw step rejected whole);
    asked once per drop when it becomes processed (every processed drop without ``state``).

    Without ``state`` every drop is read (*Observe*; ``verify``: every drop's checksums). With
    ``state`` -- the ``landing_status`` sensor's memory of the zone, updated in place -- a tick
    costs O(drops not processed yet): a processed drop is read once, then its row comes from
    ``state``; a drop not processed is checked cheaply each time and its checksums hashed again
    only when its content fingerprint changed (so a drop the landing sensor rejects never reads
    ``valid``).
    """
    failed = failed or {}
    rows: list[dict[str, object]] = []

    def settle(drop: str, status: str, reason: str, files: int, path: str) -> str:
        if status == STATUS_VALID and processed is not None and drop in processed:
            return STATUS_PROCESSED
        if status == STATUS_VALID and drop in failed:
            return STATUS_FAILED
        return status

    if state is None:
        for drop in scan_source(folder, source, verify_checksums=verify):
            status, reason = drop.status, drop.reason
            if status == STATUS_VALID and not verify and (processed is None or drop.drop_id not in processed):
                # Not processed: its checksums decide, so a drop the landing sensor rejects never reads "valid".
                status, reason, _ = validate_drop(drop.path, drop.drop_id, verify_checksums=True)
            files = drop.manifest.get("files", []) if isinstance(drop.manifest, dict) else []
            files_n = len(files) if isinstance(files, list) else 0
            status = settle(drop.drop_id, status, reason, files_n, drop.path)
            if status == STATUS_FAILED:
                reason = f"run {failed[drop.drop_id]} failed"
            elif status == STATUS_PROCESSED and notes is not None:
                reason = notes(drop.drop_id)
            rows.append(_row(drop.drop_id, status, reason, files_n, drop.path))
        return sorted(rows, key=lambda r: drop_sort_key(str(r["drop"])))

    settled: dict[str, int] = {}
    for files_n, ids in mapping(state, "processed").items():
        if files_n.isdigit():
            settled.update(dict.fromkeys(expand_ids(ids), int(files_n)))
    stored = dict(settled)
    checked = mapping(state, "checked")
    new_settled: dict[str, int] = {}
    new_checked: dict[str, list[str]] = {}
    listed = [(d, p) for d, p in list_drop_folders(folder) if not d.startswith((".", "_"))]
    done = processed or set()
    # Processed drops seen for the first time: their manifests in one concurrent read (file counts).
    first_seen = {join_path(p, MANIFEST): d for d, p in listed if d in done and d not in settled}
    for manifest_path, data in read_many(list(first_seen)).items():
        try:
            files = json.loads(data).get("files")
        except (ValueError, AttributeError):
            continue  # read again (validated) below
        if isinstance(files, list):
            settled[first_seen[manifest_path]] = len(files)

    def examine(drop_id: str, path: str) -> tuple[str, str, int, list[str] | None]:
        status, reason, manifest = validate_drop(path, drop_id, verify_checksums=False)
        files = manifest.get("files", []) if isinstance(manifest, dict) else []
        files_n = len(files) if isinstance(files, list) else 0
        if status != STATUS_VALID or drop_id in done:
            return status, reason, files_n, None
        fingerprint = content_fingerprint(path, manifest)
        cached = checked.get(drop_id)
        if isinstance(cached, list) and len(cached) >= 3 and cached[0] == fingerprint:
            status, reason = str(cached[1]), str(cached[2])
        else:
            status, reason, _ = validate_drop(path, drop_id, verify_checksums=True)
        return status, reason, files_n, [fingerprint, status, reason, manifest_fingerprint(manifest)]

    unsettled = [(d, p) for d, p in listed if not (d in done and d in settled)]
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(unsettled)))) as pool:
        examined = dict(zip([d for d, _ in unsettled], pool.map(lambda dp: examine(*dp), unsettled), strict=True))
    fingerprints = mapping(state, "fingerprints")  # processed drop -> [content fp, manifest fp] as processed
    changed = mapping(state, "changed")  # processed drop -> why its landing content is not what was processed
    for drop_id, path in listed:
        if drop_id not in examined:
            new_settled[drop_id] = settled[drop_id]
            continue
        status, reason, files_n, check = examined[drop_id]
        if check is not None:
            new_checked[drop_id] = check
        status = settle(drop_id, status, reason, files_n, path)
        if status == STATUS_PROCESSED:
            new_settled[drop_id] = files_n
            # What was validated before the drop was processed (the content its run read).
            before = checked.get(drop_id)
            if drop_id not in fingerprints and isinstance(before, list) and len(before) == 4:
                fingerprints[drop_id] = [before[0][:FP], before[3][:FP]]
        elif status == STATUS_FAILED:
            reason = f"run {failed[drop_id]} failed"
        if status != STATUS_PROCESSED:
            rows.append(_row(drop_id, status, reason, files_n, path))
    paths = dict(listed)
    fingerprints = {d: fp for d, fp in fingerprints.items() if d in new_settled}
    changed = {d: why for d, why in changed.items() if d in new_settled}
    flagged_before = set(changed)
    recheck = _recheck_order(sorted(new_settled, key=drop_sort_key), int(time.time() // 30), flagged_before)
    verdicts = pool_map(lambda d: processed_change(d, paths[d], fingerprints), recheck)
    for drop_id, why in zip(recheck, verdicts, strict=True):
        if why:
            changed[drop_id] = why
        else:
            changed.pop(drop_id, None)
    noted = {d: n for d, n in mapping(state, "notes").items() if d in new_settled}
    for drop_id in new_settled:
        if drop_id not in stored and notes is not None:  # processed since the last tick: asked once
            note = notes(drop_id)
            if note:
                noted[drop_id] = note
        why = changed.get(drop_id)
        status = STATUS_CHANGED if why else STATUS_PROCESSED
        rows.append(_row(drop_id, status, why or noted.get(drop_id, ""), new_settled[drop_id], paths[drop_id]))
    state["fingerprints"] = fingerprints
    state["changed"] = changed
    state["notes"] = noted
    if new_settled != stored or not isinstance(state.get("processed"), dict):  # else: stored form kept
        by_count: dict[int, list[str]] = {}
        for drop_id, files_n in new_settled.items():
            by_count.setdefault(files_n, []).append(drop_id)
        state["processed"] = {str(n): compact_ids(ids) for n, ids in sorted(by_count.items())}
    state["checked"] = new_checked
    return sorted(rows, key=lambda r: drop_sort_key(str(r["drop"])))


def pool_map(fn: Any, items: list[str]) -> list[Any]:
    """``[fn(i) for i in items]`` on a few threads (each item is a few object-store requests)."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(fn, items))


def _recheck_order(processed: list[str], turn: int, flagged: set[str]) -> list[str]:
    """The processed drops a tick checks again: every flagged one, then the ``turn``-th window of
    :data:`RECHECK_PER_TICK` others (the turn comes from the clock, so the cursor does not change
    when nothing did: 10,000 processed drops cost 100 a tick, each checked every 100 turns)."""
    others = [d for d in processed if d not in flagged]
    if len(others) > RECHECK_PER_TICK:
        windows = -(-len(others) // RECHECK_PER_TICK)
        at = (turn % windows) * RECHECK_PER_TICK
        others = others[at : at + RECHECK_PER_TICK]
    return sorted(flagged, key=drop_sort_key) + others


def processed_change(drop_id: str, path: str, fingerprints: dict[str, Any]) -> str:
    """Why the landing content of a processed drop is no longer what was processed ("" when it is).

    ``fingerprints[drop_id]`` is ``[content fingerprint, manifest fingerprint]`` as processed (set on
    the first check when missing). Cheap when nothing changed (the manifest and a stat per file);
    when the stats moved, the checksums decide, so a file merely touched is not flagged.
    """
    manifest, reason = read_manifest(path)
    if manifest is None:
        return f"changed after processing: {reason}; its outputs stay as processed"
    now = content_fingerprint(path, manifest)[:FP]
    recorded = fingerprints.get(drop_id)
    if not (isinstance(recorded, list) and len(recorded) == 2):
        fingerprints[drop_id] = [now, manifest_fingerprint(manifest)[:FP]]
        return ""
    if now == recorded[0]:
        return ""
    status, reason, verified = validate_drop(path, drop_id, verify_checksums=True)
    if status == STATUS_VALID and manifest_fingerprint(verified)[:FP] == recorded[1]:
        fingerprints[drop_id] = [now, recorded[1]]  # touched, same bytes
        return ""
    what = f"now {status}: {reason}" if status != STATUS_VALID else "its manifest lists other files or checksums"
    return (
        f"changed after processing ({what}); its outputs stay as processed -- land the new content as a new "
        "drop id (see docs/curation.md)"
    )


def rows_metadata(rows: list[dict[str, object]]) -> dict[str, dg.MetadataValue]:
    """The drop table plus a count per status (``rejected`` first in the UI's eyes).

    The table holds every drop not processed and the latest :data:`PROCESSED_ROWS_SHOWN` processed
    ones (a zone of 10,000 drops would otherwise record 10,000 rows at every change); the counts
    are complete.
    """
    counts: dict[str, int] = {}
    for row in rows:
        counts[str(row["status"])] = counts.get(str(row["status"]), 0) + 1
    processed = [i for i, row in enumerate(rows) if row["status"] == STATUS_PROCESSED]
    hidden = set(processed[: max(0, len(processed) - PROCESSED_ROWS_SHOWN)])
    shown = [row for i, row in enumerate(rows) if i not in hidden]
    meta: dict[str, dg.MetadataValue] = {
        "drops": dg.MetadataValue.table([dg.TableRecord(row) for row in shown], schema=_SCHEMA),
    }
    if hidden:
        meta["hidden_processed_rows"] = dg.MetadataValue.int(len(hidden))
    for status in ("rejected", "incomplete", "valid", STATUS_FAILED, STATUS_PROCESSED, STATUS_CHANGED):
        meta[f"count/{status}"] = dg.MetadataValue.int(counts.get(status, 0))
    for status, name in (
        ("rejected", "rejected"),
        (STATUS_CHANGED, "changed_after_processing"),
        (STATUS_FAILED, STATUS_FAILED),
    ):
        flagged = [f"{row['drop']}: {row['reason']}" for row in rows if row["status"] == status]
        if flagged:
            meta[name] = dg.MetadataValue.md("\n".join(f"- {line}" for line in flagged))
    return meta


# The landing checks of ``landing/<source>``: (check name, drop status it watches, description).
LANDING_CHECKS = (
    (
        CHANGED_CHECK,
        STATUS_CHANGED,
        "Fails while the files of a processed drop differ from what was processed (its outputs stay as processed; "
        "land new content as a new drop id).",
    ),
    (
        FAILED_CHECK,
        STATUS_FAILED,
        "Fails while a drop's latest run failed (later drops go on without it; fix it and re-run it).",
    ),
)


def landing_checks(source: str, rows: list[dict[str, object]]) -> list[dg.AssetCheckEvaluation]:
    """The landing checks' evaluations for a drop table (what the ``landing_status`` sensor records)."""
    out = []
    for name, status, _ in LANDING_CHECKS:
        flagged = [f"{row['drop']}: {row['reason']}" for row in rows if row["status"] == status]
        out.append(
            dg.AssetCheckEvaluation(
                asset_key=landing_key(source),
                check_name=name,
                passed=not flagged,
                metadata={
                    "drops_flagged": dg.MetadataValue.int(len(flagged)),
                    "drops": dg.MetadataValue.md("\n".join(f"- {line}" for line in flagged) or "none"),
                },
            )
        )
    return out


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
    def _observe(context: dg.AssetExecutionContext, marin_storage: MarinStorageResource) -> dg.ObserveResult:
        rows = drop_rows(context.instance, marin_storage.root(), drops, local_keys, verify=True)
        return dg.ObserveResult(data_version=dg.DataVersion(_version(rows)), metadata=rows_metadata(rows))

    return _observe


def landing_zone_checks(drops: LandingDrops) -> list[dg.AssetChecksDefinition]:
    """The landing checks of a declared landing zone (:data:`LANDING_CHECKS`). The ``landing_status``
    sensor records them with each changed drop table; executing one reads the latest recorded table."""
    return [_table_check(landing_key(drops.source), *spec) for spec in LANDING_CHECKS]


def _table_check(key: dg.AssetKey, name: str, status: str, description: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=key, name=name, description=description)
    def _check(context) -> dg.AssetCheckResult:  # noqa: ANN001 - Dagster refuses a postponed (text) annotation here
        records = context.instance.fetch_observations(key, limit=1).records
        observation = records[0].asset_observation if records else None
        metadata = observation.metadata if observation is not None else {}
        count = metadata.get(f"count/{status}")
        flagged = int(count.value) if count is not None else 0
        listed = metadata.get(status.replace(" ", "_"))
        return dg.AssetCheckResult(
            passed=flagged == 0,
            metadata={
                "drops_flagged": flagged,
                "drops": dg.MetadataValue.md(str(listed.value) if listed is not None else "none"),
            },
        )

    return _check


def build_landing_status_sensor(
    zones: Sequence[tuple[LandingDrops, str, Sequence[dg.AssetKey]]], minimum_interval_seconds: int = 30
) -> dg.SensorDefinition:
    """A sensor recording each landing zone's drop table when it changed.

    Cursor: source -> ``{"version": table hash, "zone": zone_rows' state}``; a tick costs one listing
    per zone plus the drops not processed yet (see :func:`zone_rows`).
    """

    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Records the drops of each watched landing zone, with their status, as observations "
        "of landing/<source> (see the asset's metadata table).",
    )
    def _landing_status(
        context: dg.SensorEvaluationContext, marin_storage: MarinStorageResource
    ) -> dg.SensorResult | dg.SkipReason:
        state = load_cursor(context.cursor)
        prefix = marin_storage.root()
        failures: list[str] = []
        events = []
        changed_state = False
        for drops, _, local_keys in zones:
            source = drops.source
            entry = mapping(state, source)
            zone = mapping(entry, "zone")
            flagged_before = mapping(zone, "changed")
            try:
                rows = drop_rows(context.instance, prefix, drops, local_keys, verify=False, state=zone)
            except Exception as exc:  # noqa: BLE001 - the other zones go on; the tick fails below, naming it
                failures.append(f"landing/{source}: {type(exc).__name__}: {exc}")
                context.log.error(f"landing/{source}: reading the zone failed: {type(exc).__name__}: {exc}")
                continue
            for drop_id, why in sorted(mapping(zone, "changed").items()):
                if flagged_before.get(drop_id) != why:
                    context.log.warning(f"drop {drop_id!r} of {source!r}: {why}")
            version = _version(rows)
            if entry.get("version") != version:
                events.append(dg.AssetObservation(asset_key=landing_key(source), metadata=rows_metadata(rows)))
                events.extend(landing_checks(source, rows))
            if entry.get("version") != version or entry.get("zone") != zone:
                state[source] = {"version": version, "zone": zone}
                changed_state = True
        if failures:
            # Not a property of any drop (a storage error, or a bug): the tick fails -- visible in the
            # tick history -- and the next one retries from the same cursor.
            raise RuntimeError("landing status could not read " + "; ".join(failures))
        if not changed_state:
            return dg.SkipReason("no landing zone changed")
        return dg.SensorResult(asset_events=events, cursor=dump_cursor(state))

    return _landing_status
