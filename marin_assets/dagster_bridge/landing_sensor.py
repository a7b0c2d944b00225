"""Dagster sensor on the landing zone: new complete drop -> dynamic partition + one run.

Glue only: the zone's logic (listing, validation) lives in ``landing/zone.py``. Each tick:

1. lists ``<prefix>/landing/<source>/`` (cheap: manifests only, no checksums);
2. for every valid drop not yet handled, verifies its checksums, adds the drop to the dynamic
   partition set (unless present) and requests a run for that partition with
   ``run_key = "<source>:<drop>:<manifest fingerprint>"`` -- Dagster drops a second request with
   the same key, and the cursor remembers the drop, so a drop seen twice starts one run;
3. logs the reason of a newly rejected drop as a warning once (again when the reason changes),
   and reports every drop that is still rejected on **every** tick: in the tick's log and, when
   the tick requests no run, as its ``SkipReason`` (what the UI's tick history shows). Incomplete
   drops (no manifest yet) are left alone and picked up when complete. A drop rejected by its
   checksums is remembered with its content fingerprint (the manifest plus size and mtime of
   every listed file, :func:`~marin_assets.landing.zone.content_fingerprint`) and hashed
   again as soon as that changes -- a rewritten manifest *or* a replaced data file (e.g. an
   upload that was still running when the drop was first checked).

Cursor (JSON): ``{"seen": {drop: files fingerprint}, "rejected": {drop: reason},
"checksum_rejected": {drop: {"manifest": content fingerprint, "reason": reason}}}``; cursors
written before ``checksum_rejected`` existed load fine.

Run requests come in drop-id order. Dedup of drop N needs the indices of drops < N, so limit
concurrent curation runs (e.g. a run-queue tag concurrency limit of 1 on ``marin/curation``) or
rely on the dedup step failing loudly and retrying.

Nothing a drop contains can crash the sensor: validation returns reasons instead of raising, and
a storage error during listing becomes a ``SkipReason``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.cursors import dump_cursor, load_cursor, mapping
from marin_assets.landing.zone import (
    STATUS_INCOMPLETE,
    STATUS_REJECTED,
    STATUS_VALID,
    LandingDrops,
    content_fingerprint,
    drop_sort_key,
    scan_source,
    validate_drop,
)

RUN_TAG = "marin/curation"


def _load_cursor(raw: str | None) -> dict[str, Any]:
    data = load_cursor(raw)
    checksum_rejected = {
        drop: entry
        for drop, entry in mapping(data, "checksum_rejected").items()
        if isinstance(entry, dict) and isinstance(entry.get("manifest"), str) and isinstance(entry.get("reason"), str)
    }
    return {
        "seen": mapping(data, "seen"),
        "rejected": mapping(data, "rejected"),
        "checksum_rejected": checksum_rejected,
    }


def evaluate_landing(
    prefix: str,
    source: str,
    cursor: str | None,
    has_partition: Callable[[str], bool],
    log: Any,
    landing_dir: str | None = None,
) -> tuple[list[tuple[str, str, bool]], str, list[str]]:
    """The sensor's decision, without Dagster types (kept separate so it is easy to test/reuse).

    ``landing_dir``: the source's folder (relative to ``prefix`` or absolute; default
    ``landing/<source>``).

    Returns ``(new drops as (drop_id, run_key, needs_partition), new cursor, rejected reasons)``.
    """
    state = _load_cursor(cursor)
    new: list[tuple[str, str, bool]] = []
    rejected_msgs: list[str] = []
    folder = LandingDrops(landing_dir or f"landing/{source}").folder(prefix)
    drops = scan_source(folder, source, verify_checksums=False)
    checksum_rejected = state["checksum_rejected"]
    present = {drop.drop_id or drop.path for drop in drops}
    for cache in (checksum_rejected, state["rejected"]):
        for key in [k for k in cache if k not in present]:
            del cache[key]  # the drop folder is gone: forget it (keeps the cursor small)
    for drop in sorted(drops, key=lambda d: drop_sort_key(d.drop_id)):
        key = drop.drop_id or drop.path
        if drop.status == STATUS_INCOMPLETE:
            log.debug(f"drop {key!r} of {source!r} is incomplete ({drop.reason}); waiting")
            continue
        status, reason = drop.status, drop.reason
        if status == STATUS_VALID and key not in state["seen"]:
            # Checksums only once per drop content: hashing every drop on every tick would not
            # scale. A drop they rejected is hashed again once its manifest or files change.
            cached = checksum_rejected.get(key)
            fingerprint_before = content_fingerprint(drop.path, drop.manifest)
            if cached is not None and cached["manifest"] == fingerprint_before:
                status, reason = STATUS_REJECTED, cached["reason"]
            else:
                status, reason, verified = validate_drop(drop.path, drop.drop_id, verify_checksums=True)
                if status == STATUS_REJECTED:
                    # Keyed by the content actually verified (it may have changed since the scan).
                    checksum_rejected[key] = {"manifest": content_fingerprint(drop.path, verified), "reason": reason}
                else:
                    checksum_rejected.pop(key, None)
        if status == STATUS_REJECTED:
            if state["rejected"].get(key) != reason:
                msg = f"rejected drop {key!r} of source {source!r}: {reason}"
                log.warning(msg)
                rejected_msgs.append(msg)
                state["rejected"][key] = reason
            continue
        if status != STATUS_VALID:
            continue
        state["rejected"].pop(key, None)
        fingerprint = drop.fingerprint
        if key in state["seen"]:
            if state["seen"][key] != fingerprint:
                log.warning(f"drop {key!r} changed after it was picked up; drops are immutable, not re-running")
            continue
        state["seen"][key] = fingerprint
        new.append((key, f"{source}:{key}:{fingerprint}", not has_partition(key)))
    return new, dump_cursor(state), rejected_msgs


def rejected_summary(cursor: str, source: str, limit: int = 10) -> str:
    """One line naming every drop the cursor holds as rejected, with its reason ("" when none)."""
    rejected = _load_cursor(cursor)["rejected"]
    if not rejected:
        return ""
    keys = sorted(rejected, key=drop_sort_key)
    parts = [f"{key!r}: {rejected[key]}" for key in keys[:limit]]
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return f"{len(keys)} rejected drop(s) of {source!r} -- " + "; ".join(parts) + more


def build_landing_sensor(
    target: Any,
    partitions_def: dg.DynamicPartitionsDefinition,
    prefix_resolver: Callable[[], str],
    *,
    source: str,
    landing_dir: str | None = None,
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor that turns new complete drops of ``source`` into partitions and runs.

    Args:
        target: what each run materializes -- a job, an asset selection, or assets.
        partitions_def: the ``DynamicPartitionsDefinition`` (name ``"drops"``) of the assets.
        prefix_resolver: returns the storage prefix holding ``landing/`` (called every tick, so
            it can read a resource/env var at run time rather than at import time).
        source: landing source to watch.
        landing_dir: its folder, relative to the prefix or absolute (default ``landing/<source>``).
        name: sensor name (default ``landing_sensor_<source>`` with '-' -> '_').
    """
    if not partitions_def.name:
        raise ValueError("partitions_def must be a named DynamicPartitionsDefinition")
    sensor_name = name or f"landing_sensor_{source.replace('-', '_').replace('.', '_')}"

    @dg.sensor(
        name=sensor_name,
        target=target,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Adds a '{partitions_def.name}' partition and requests a run for each new complete "
        f"drop in <prefix>/landing/{source}/.",
    )
    def _landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        try:
            prefix = prefix_resolver()
            new, cursor, _ = evaluate_landing(
                prefix,
                source,
                context.cursor,
                lambda key: context.instance.has_dynamic_partition(partitions_def.name, key),
                context.log,
                landing_dir,
            )
        except Exception as exc:  # storage hiccups must not kill the sensor
            context.log.error(f"landing scan failed: {type(exc).__name__}: {exc}")
            return dg.SkipReason(f"landing scan failed: {type(exc).__name__}: {exc}")
        to_add = [key for key, _, needs in new if needs]
        run_requests = [
            dg.RunRequest(
                run_key=run_key,
                partition_key=key,
                tags={RUN_TAG: source, "marin/drop": key},
            )
            for key, run_key, _ in new
        ]
        for key, _, _ in new:
            context.log.info(f"new drop {key!r} of {source!r}: requesting a run")
        # Every tick, not only the first: a rejection stays visible in the UI while it persists.
        still_rejected = rejected_summary(cursor, source)
        if still_rejected:
            context.log.warning(still_rejected)
        return dg.SensorResult(
            run_requests=run_requests,
            skip_reason=still_rejected if still_rejected and not run_requests else None,
            dynamic_partitions_requests=[partitions_def.build_add_request(to_add)] if to_add else [],
            cursor=cursor,
        )

    return _landing_sensor
