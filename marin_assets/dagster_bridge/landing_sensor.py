"""Dagster sensor on the landing zone: new complete drop -> dynamic partition + one run.

Glue only: the zone's logic (listing, validation) lives in ``landing/zone.py``. A steady tick costs
O(new drops), not O(all drops), on local folders and gs:// alike. Each tick:

1. lists the source's folder once (``<prefix>/landing/<source>/``; a fresh listing, never a cached
   one) -- the only request whose cost grows with the number of drops;
2. skips every drop the cursor holds as processed without reading anything of it (drops are
   immutable once processed: this sensor never reads one again; the ``landing_status`` sensor flags
   one whose files changed, see ``landing_assets.py``);
3. for the drops left, asks the Dagster instance once which of them already have every asset of
   the drop job materialized (``already_processed``) -- a freshly enabled sensor marks those
   processed (adding a missing partition) instead of launching catch-up runs;
4. reads the rest (manifest, names, sizes, symlinks) and verifies the checksums of each valid one
   once; adds it to the dynamic partition set (unless present) and requests a run for it with
   ``run_key = "<source>:<drop>:<files fingerprint>"`` -- Dagster drops a second request with the
   same key, and the cursor remembers the drop, so a drop seen twice starts one run;
5. logs the reason of a newly rejected drop as a warning once (again when the reason changes),
   and reports every drop that is still rejected on **every** tick: in the tick's log and, when
   the tick requests no run, as its ``SkipReason`` (what the UI's tick history shows). Incomplete
   drops (no manifest yet) are left alone and picked up when complete. A drop rejected by its
   checksums is remembered with its stat signature (the manifest plus size, mtime and ctime --
   or generation and the store's checksum -- of every listed file,
   :func:`~marin_assets.landing.zone.stat_signature`) and hashed again as soon as that changes --
   a rewritten manifest *or* a replaced data file. A drop whose upload is still running (a listed
   file shorter than the manifest says, or missing while the uploader's hidden temporaries are
   there) is ``incomplete``: waited for, logged at debug level only, never reported as rejected.

Cursor (JSON, read by :mod:`~marin_assets.dagster_bridge.cursors`): ``{"processed": [compact drop
ids], "rejected": {drop: reason}, "checksum_rejected": {drop: {"manifest": stat signature,
"reason": reason}}}`` -- ``drop-001`` ... ``drop-900`` are stored as ``"drop-{001..900}"``, so it
stays small with thousands of drops. Older cursors (``"seen": {drop: fingerprint}``) load fine.

Run requests come in drop-id order. Dedup of drop N needs the indices of drops < N, so limit
concurrent curation runs (e.g. a run-queue tag concurrency limit of 1 on ``marin/curation``); a drop
whose run failed does not block the later drops' dedup (see docs/curation.md, "A failed drop").

The storage prefix comes from the ``marin_storage`` resource, a typed parameter of the sensor, read
on every tick (``prefix_resolver`` replaces it for tests and custom locations).

Nothing a drop contains can crash the sensor: validation returns reasons instead of raising. What
is no property of a drop -- a storage error, a bug in the validation -- fails the tick (an error in
the tick history naming the source and the exception; the cursor is not advanced, so the next tick
retries): never a drop marked rejected for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dagster as dg

from marin_assets.dagster_bridge.cursors import dump_cursor, load_cursor, mapping
from marin_assets.landing.drop_ids import compact_ids, expand_ids
from marin_assets.landing.zone import (
    STATUS_INCOMPLETE,
    STATUS_REJECTED,
    STATUS_VALID,
    DropStatus,
    LandingDrops,
    drop_sort_key,
    list_drop_folders,
    stat_signature,
    validate_drop,
)
from marin_resources.dagster_resources import MarinStorageResource

RUN_TAG = "marin/curation"


class LandingScanError(RuntimeError):
    """A tick could not examine the landing zone (storage error or bug); the next tick retries."""


def _load_cursor(raw: str | None) -> dict[str, Any]:
    data = load_cursor(raw)
    checksum_rejected = {
        drop: entry
        for drop, entry in mapping(data, "checksum_rejected").items()
        if isinstance(entry, dict) and isinstance(entry.get("manifest"), str) and isinstance(entry.get("reason"), str)
    }
    processed = expand_ids(data.get("processed")) | set(mapping(data, "seen"))  # "seen": older cursors
    return {
        "processed": processed,
        "rejected": mapping(data, "rejected"),
        "checksum_rejected": checksum_rejected,
        # The stored form, reused while the set is unchanged (folding 10,000 ids costs more than a tick).
        "_stored": (len(processed), data.get("processed") if "seen" not in data else None),
    }


def _dump(state: dict[str, Any]) -> str:
    count, stored = state.pop("_stored", (None, None))
    same = isinstance(stored, list) and count == len(state["processed"]) and not state.get("_added")
    state.pop("_added", None)
    return dump_cursor({**state, "processed": stored if same else compact_ids(state["processed"])})


EXAMINE_THREADS = 8
EXAMINE_BATCH = 50
MAX_VERIFIED_PER_TICK = 200


def _examine(
    source: str, drop_id: str, path: str, checksum_rejected: dict[str, dict[str, str]]
) -> tuple[DropStatus, str, str, str | None]:
    """``(drop after the cheap checks, status, reason, stat signature if hashed else None)``.

    Checksums are verified once per drop content: a drop they rejected (``checksum_rejected``) is
    hashed again only once its manifest or a listed file changed.
    """
    status, reason, manifest = validate_drop(path, drop_id, verify_checksums=False)
    drop = DropStatus(source, drop_id, status, reason, path, manifest)
    if status != STATUS_VALID:
        return drop, status, reason, None
    cached = checksum_rejected.get(drop_id)
    if cached is not None and cached["manifest"] == stat_signature(path, manifest):
        return drop, STATUS_REJECTED, cached["reason"], None
    status, reason, verified = validate_drop(path, drop_id, verify_checksums=True)
    # Keyed by the files actually verified (they may have changed since the cheap checks).
    return drop, status, reason, stat_signature(path, verified)


def evaluate_landing(
    prefix: str,
    source: str,
    cursor: str | None,
    has_partition: Callable[[str], bool],
    log: Any,
    landing_dir: str | None = None,
    already_processed: Callable[[], set[str]] | None = None,
    max_verified_per_tick: int = MAX_VERIFIED_PER_TICK,
) -> tuple[list[tuple[str, str, bool]], str, list[str]]:
    """The sensor's decision, without Dagster types (kept separate so it is easy to test/reuse).

    Args:
        landing_dir: the source's folder (relative to ``prefix`` or absolute; default
            ``landing/<source>``).
        already_processed: the drops whose units already succeeded (asked at most once a tick, and
            only when some drop is not in the cursor yet); they are marked processed, no run.
        max_verified_per_tick: stop after about this many drops had their checksums verified (a
            zone of thousands of drops nothing ran yet takes a few ticks, none of them too long).

    Returns ``(new drops as (drop_id, run_key, needs_partition), new cursor, rejected reasons)``;
    a processed drop whose partition is missing comes back with ``run_key`` ``""`` (add it, run nothing).
    """
    state = _load_cursor(cursor)
    new: list[tuple[str, str, bool]] = []
    rejected_msgs: list[str] = []
    folder = LandingDrops(landing_dir or f"landing/{source}").folder(prefix)
    listed = [(d, p) for d, p in list_drop_folders(folder) if not d.startswith((".", "_"))]
    present = {d for d, _ in listed}
    checksum_rejected = state["checksum_rejected"]
    for cache in (checksum_rejected, state["rejected"]):
        for key in [k for k in cache if k not in present]:
            del cache[key]  # the drop folder is gone: forget it (keeps the cursor small)
    state["processed"] &= present
    pending = sorted(((d, p) for d, p in listed if d not in state["processed"]), key=lambda dp: drop_sort_key(dp[0]))
    if pending and already_processed is not None:
        done = already_processed()
        for drop_id, _ in pending:
            if drop_id in done:
                state["processed"].add(drop_id)
                state["_added"] = True
                state["rejected"].pop(drop_id, None)
                checksum_rejected.pop(drop_id, None)
                if not has_partition(drop_id):
                    new.append((drop_id, "", True))
                log.debug(f"drop {drop_id!r} of {source!r}: its units already succeeded; marked processed")
        pending = [(d, p) for d, p in pending if d not in done]
    verified = 0
    examined: list[tuple[DropStatus, str, str, str | None]] = []
    # Drops are examined on a few threads (object stores answer each request in milliseconds, and a
    # drop needs several), then decided in drop order.
    for start in range(0, len(pending), EXAMINE_BATCH):
        batch = pending[start : start + EXAMINE_BATCH]
        with ThreadPoolExecutor(max_workers=min(EXAMINE_THREADS, len(batch))) as pool:
            results = list(pool.map(lambda dp: _examine(source, dp[0], dp[1], checksum_rejected), batch))
        examined.extend(results)
        verified += sum(1 for _, _, _, hashed in results if hashed is not None)
        if verified >= max_verified_per_tick:
            break  # bounded tick: the rest waits for the next one (the cursor does not hold them yet)
    for drop, status, reason, hashed in examined:
        key = drop.drop_id
        if drop.status == STATUS_INCOMPLETE:
            log.debug(f"drop {key!r} of {source!r} is incomplete ({drop.reason}); waiting")
            continue
        if hashed is not None:  # its checksums were verified this tick
            if status == STATUS_REJECTED:
                checksum_rejected[key] = {"manifest": hashed, "reason": reason}
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
        state["processed"].add(key)
        state["_added"] = True
        new.append((key, f"{source}:{key}:{drop.fingerprint}", not has_partition(key)))
    return new, _dump(state), rejected_msgs


def rejected_summary(cursor: str, source: str, limit: int = 10) -> str:
    """One line naming every drop the cursor holds as rejected, with its reason ("" when none)."""
    rejected = _load_cursor(cursor)["rejected"]
    if not rejected:
        return ""
    keys = sorted(rejected, key=drop_sort_key)
    parts = [f"{key!r}: {rejected[key]}" for key in keys[:limit]]
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return f"{len(keys)} rejected drop(s) of {source!r} -- " + "; ".join(parts) + more


def materialized_everywhere(instance: dg.DagsterInstance, keys: Sequence[dg.AssetKey]) -> set[str]:
    """The partitions every one of ``keys`` has materialized (the drops whose units all succeeded)."""
    done: set[str] | None = None
    for key in keys:
        partitions = set(instance.get_materialized_partitions(key))
        done = partitions if done is None else done & partitions
    return done or set()


def build_landing_sensor(
    target: Any,
    partitions_def: dg.DynamicPartitionsDefinition,
    prefix_resolver: Callable[[], str] | None = None,
    *,
    source: str,
    landing_dir: str | None = None,
    processed_keys: Sequence[dg.AssetKey] = (),
    name: str | None = None,
    minimum_interval_seconds: int = 30,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
) -> dg.SensorDefinition:
    """A sensor that turns new complete drops of ``source`` into partitions and runs.

    Args:
        target: what each run materializes -- a job, an asset selection, or assets.
        partitions_def: the source's ``DynamicPartitionsDefinition`` (named after the source).
        prefix_resolver: returns the storage prefix holding ``landing/``. None (the code
            location's sensors): the sensor receives the storage resource as a typed parameter
            (``marin_storage: MarinStorageResource``) and reads the prefix from it on every tick,
            so a deployment sets it in the resource, never through the sensor's environment.
        source: landing source to watch.
        landing_dir: its folder, relative to the prefix or absolute (default ``landing/<source>``).
        processed_keys: the assets a drop's run materializes (the drop job's); a drop all of them
            hold is processed already -- a freshly enabled sensor launches no run for it.
        name: sensor name (default ``landing_sensor_<source>`` with '-' -> '_').
    """
    if not partitions_def.name:
        raise ValueError("partitions_def must be a named DynamicPartitionsDefinition")
    sensor_name = name or f"landing_sensor_{source.replace('-', '_').replace('.', '_')}"
    tick = _LandingTick(source, partitions_def, landing_dir, processed_keys)
    decorate = dg.sensor(
        name=sensor_name,
        target=target,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Adds a '{partitions_def.name}' partition and requests a run for each new complete "
        f"drop in <prefix>/landing/{source}/.",
    )
    if prefix_resolver is not None:
        resolve = prefix_resolver

        @decorate
        def _with_resolver(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
            try:
                prefix = resolve()
            except Exception as exc:
                raise _scan_failed(context, source, exc) from exc
            return tick(context, prefix)

        return _with_resolver

    @decorate
    def _with_storage(
        context: dg.SensorEvaluationContext, marin_storage: MarinStorageResource
    ) -> dg.SensorResult | dg.SkipReason:
        return tick(context, marin_storage.root())

    return _with_storage


def _scan_failed(context: dg.SensorEvaluationContext, source: str, exc: Exception) -> LandingScanError:
    """The error a tick raises for what is no property of any drop (a storage error, or a bug): the
    tick fails -- visible in the sensor's tick history with this message -- and the next tick
    retries from the same cursor. No drop is ever marked rejected for it."""
    message = f"landing scan of {source!r} failed: {type(exc).__name__}: {exc}"
    context.log.error(message)
    return LandingScanError(message)


class _LandingTick:
    """One tick of a landing sensor: :func:`evaluate_landing`, then its answer in Dagster's terms."""

    def __init__(
        self,
        source: str,
        partitions_def: dg.DynamicPartitionsDefinition,
        landing_dir: str | None,
        processed_keys: Sequence[dg.AssetKey],
    ) -> None:
        self.source, self.partitions_def = source, partitions_def
        self.landing_dir, self.processed_keys = landing_dir, processed_keys

    def __call__(self, context: dg.SensorEvaluationContext, prefix: str) -> dg.SensorResult:
        source = self.source
        try:
            new, cursor, _ = evaluate_landing(
                prefix,
                source,
                context.cursor,
                self._partition_lookup(context),
                context.log,
                self.landing_dir,
                (lambda: materialized_everywhere(context.instance, self.processed_keys))
                if self.processed_keys
                else None,
            )
        except Exception as exc:
            raise _scan_failed(context, source, exc) from exc
        to_add = [key for key, _, needs in new if needs]
        run_requests = [
            dg.RunRequest(run_key=run_key, partition_key=key, tags={RUN_TAG: source, "marin/drop": key})
            for key, run_key, _ in new
            if run_key  # "": processed already (its units succeeded), only its partition was missing
        ]
        for request in run_requests:
            context.log.info(f"new drop {request.partition_key!r} of {source!r}: requesting a run")
        # Every tick, not only the first: a rejection stays visible in the UI while it persists.
        still_rejected = rejected_summary(cursor, source)
        if still_rejected:
            context.log.warning(still_rejected)
        return dg.SensorResult(
            run_requests=run_requests,
            skip_reason=still_rejected if still_rejected and not run_requests else None,
            dynamic_partitions_requests=[self.partitions_def.build_add_request(to_add)] if to_add else [],
            cursor=cursor,
        )

    def _partition_lookup(self, context: dg.SensorEvaluationContext) -> Callable[[str], bool]:
        """Whether the partition set holds a key: one query for the set, the first time a tick asks
        (a fresh sensor asks for every drop)."""
        known: set[str] = set()

        def has_partition(key: str) -> bool:
            if not known:
                known.update(context.instance.get_dynamic_partitions(self.partitions_def.name))
                known.add("")  # asked once even when the set is empty
            return key in known

        return has_partition
