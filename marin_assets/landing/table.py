"""The drop table of one source's landing folder: one row per drop folder, with its status (no Dagster).

Statuses: ``valid``, ``incomplete``, ``rejected`` (with the reason) from the zone
(:mod:`~marin_assets.landing.zone`), and three the table adds from what ran: ``failed`` (its latest
run failed), ``processed`` (valid, and every asset of its drop job holds it) and ``changed after
processing`` (a processed drop whose content -- the sha256 of every listed file, or its manifest --
is no longer what was processed; its outputs stay as processed).

:func:`zone_rows` builds the table in one of two ways: reading every drop (*Observe*), or from a
state the caller keeps between calls (the ``landing_status`` sensor's cursor), so that a tick costs
the drops not processed yet plus a bounded round robin of processed ones. Glue that turns rows into
Dagster observations and checks lives in ``dagster_bridge/landing_assets.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from marin_assets.execution.storage import join_path, read_many
from marin_assets.landing.drop_ids import compact_ids, expand_ids
from marin_assets.landing.zone import (
    MANIFEST,
    STATUS_VALID,
    content_fingerprint,
    drop_sort_key,
    expected_content_fingerprint,
    list_drop_folders,
    manifest_fingerprint,
    read_manifest,
    scan_source,
    stat_signature,
    validate_drop,
)

STATUS_PROCESSED = "processed"
STATUS_FAILED = "failed"
STATUS_CHANGED = "changed after processing"
RECHECK_PER_TICK = 100
"""Processed drops whose content a stateful call checks again (round robin), at most."""
RECHECK_BYTES_PER_TICK = 1 << 30
"""...and at most about this many bytes of their files hashed (at least one drop a call)."""
FP = 10  # hex characters of a fingerprint kept per processed drop in the state

Row = dict[str, object]


def _row(drop: str, status: str, reason: str, files: int, path: str) -> Row:
    return {"drop": drop, "status": status, "reason": reason, "files": files, "path": path}


def _dict(state: dict[str, Any], key: str) -> dict[str, Any]:
    value = state.get(key)
    return dict(value) if isinstance(value, dict) else {}


def _file_count(manifest: Any) -> int:
    files = manifest.get("files", []) if isinstance(manifest, dict) else []
    return len(files) if isinstance(files, list) else 0


def _settle(drop: str, status: str, processed: set[str] | None, failed: dict[str, str]) -> str:
    """The table's status of a drop the zone calls ``status``."""
    if status == STATUS_VALID and processed is not None and drop in processed:
        return STATUS_PROCESSED
    if status == STATUS_VALID and drop in failed:
        return STATUS_FAILED
    return status


def zone_rows(
    folder: str,
    source: str,
    processed: set[str] | None,
    verify: bool,
    state: dict[str, Any] | None = None,
    failed: dict[str, str] | None = None,
    notes: Callable[[str], str] | None = None,
) -> list[Row]:
    """The drop table of one source's folder.

    ``notes(drop)``: the reason column of a processed drop (the files its raw step rejected whole);
    asked once per drop when it becomes processed (every processed drop without ``state``).

    Without ``state`` every drop is read (*Observe*; ``verify``: every drop's checksums). With
    ``state`` -- the caller's memory of the zone, updated in place -- a call costs O(drops not
    processed yet): a processed drop is read once, then its row comes from ``state``; a drop not
    processed is checked cheaply each time and its checksums hashed again only when its stat
    signature changed (so a drop the landing sensor rejects never reads ``valid``); a bounded
    round robin of processed drops has its content hashed again (:func:`processed_change`).
    """
    if state is None:
        return _rows_read_whole(folder, source, processed, verify, failed or {}, notes)
    return _rows_with_state(folder, processed, state, failed or {}, notes)


def _rows_read_whole(
    folder: str,
    source: str,
    processed: set[str] | None,
    verify: bool,
    failed: dict[str, str],
    notes: Callable[[str], str] | None,
) -> list[Row]:
    """Every drop read (what *Observe* shows)."""
    rows = []
    for drop in scan_source(folder, source, verify_checksums=verify):
        status, reason = drop.status, drop.reason
        if status == STATUS_VALID and not verify and (processed is None or drop.drop_id not in processed):
            # Not processed: its checksums decide, so a drop the landing sensor rejects never reads "valid".
            status, reason, _ = validate_drop(drop.path, drop.drop_id, verify_checksums=True)
        files_n = _file_count(drop.manifest)
        status = _settle(drop.drop_id, status, processed, failed)
        if status == STATUS_FAILED:
            reason = f"run {failed[drop.drop_id]} failed"
        elif status == STATUS_PROCESSED and notes is not None:
            reason = notes(drop.drop_id)
        rows.append(_row(drop.drop_id, status, reason, files_n, drop.path))
    return sorted(rows, key=lambda r: drop_sort_key(str(r["drop"])))


def _stored_settled(state: dict[str, Any]) -> dict[str, int]:
    """Processed drop -> its file count, as ``state`` holds them (``{"<count>": [compact ids]}``)."""
    settled: dict[str, int] = {}
    for files_n, ids in _dict(state, "processed").items():
        if files_n.isdigit():
            settled.update(dict.fromkeys(expand_ids(ids), int(files_n)))
    return settled


def _count_first_seen(listed: list[tuple[str, str]], done: set[str], settled: dict[str, int]) -> None:
    """Add the file counts of processed drops seen for the first time (their manifests in one
    concurrent read) to ``settled``; one that does not parse is read again, validated, later."""
    first_seen = {join_path(p, MANIFEST): d for d, p in listed if d in done and d not in settled}
    for manifest_path, data in read_many(list(first_seen)).items():
        try:
            files = json.loads(data).get("files")
        except (ValueError, RecursionError, AttributeError):
            continue
        if isinstance(files, list):
            settled[first_seen[manifest_path]] = len(files)


def _examine_unprocessed(
    drop_id: str, path: str, done: set[str], checked: dict[str, Any]
) -> tuple[str, str, int, list[str] | None]:
    """``(status, reason, file count, check)`` of a drop not settled yet; ``check`` (kept in the
    state) is ``[stat signature, status, reason, manifest fingerprint, content fingerprint]`` of a
    valid drop not processed, whose checksums are hashed again only when the signature moved."""
    status, reason, manifest = validate_drop(path, drop_id, verify_checksums=False)
    files_n = _file_count(manifest)
    if status != STATUS_VALID or drop_id in done:
        return status, reason, files_n, None
    signature = stat_signature(path, manifest)
    cached = checked.get(drop_id)
    if isinstance(cached, list) and len(cached) >= 3 and cached[0] == signature:
        status, reason = str(cached[1]), str(cached[2])
    else:
        status, reason, _ = validate_drop(path, drop_id, verify_checksums=True)
    # Verified: the files hold what the manifest says, so the content fingerprint needs no read.
    content = expected_content_fingerprint(manifest) if status == STATUS_VALID else ""
    return status, reason, files_n, [signature, status, reason, manifest_fingerprint(manifest), content]


def _rows_with_state(
    folder: str,
    processed: set[str] | None,
    state: dict[str, Any],
    failed: dict[str, str],
    notes: Callable[[str], str] | None,
) -> list[Row]:
    """The table from ``state`` plus what changed since (see :func:`zone_rows`)."""
    settled = _stored_settled(state)
    stored = dict(settled)
    checked = _dict(state, "checked")
    listed = [(d, p) for d, p in list_drop_folders(folder) if not d.startswith((".", "_"))]
    done = processed or set()
    _count_first_seen(listed, done, settled)
    unsettled = [(d, p) for d, p in listed if not (d in done and d in settled)]
    outcomes = pool_map(lambda dp: _examine_unprocessed(dp[0], dp[1], done, checked), unsettled)
    examined = dict(zip([d for d, _ in unsettled], outcomes, strict=True))
    fingerprints = _dict(state, "fingerprints")  # processed drop -> [content fp, manifest fp] as processed
    rows: list[Row] = []
    new_settled: dict[str, int] = {}
    new_checked: dict[str, list[str]] = {}
    for drop_id, path in listed:
        if drop_id not in examined:
            new_settled[drop_id] = settled[drop_id]
            continue
        status, reason, files_n, check = examined[drop_id]
        if check is not None:
            new_checked[drop_id] = check
        status = _settle(drop_id, status, processed, failed)
        if status == STATUS_PROCESSED:
            new_settled[drop_id] = files_n
            # What was validated before the drop was processed (the content its run read).
            before = checked.get(drop_id)
            if drop_id not in fingerprints and isinstance(before, list) and len(before) == 5 and before[4]:
                fingerprints[drop_id] = [before[4][:FP], before[3][:FP]]
            continue
        if status == STATUS_FAILED:
            reason = f"run {failed[drop_id]} failed"
        rows.append(_row(drop_id, status, reason, files_n, path))
    paths = dict(listed)
    fingerprints = {d: fp for d, fp in fingerprints.items() if d in new_settled}
    changed = _recheck_processed(state, new_settled, paths, fingerprints)
    rows.extend(_processed_rows(state, new_settled, stored, paths, changed, notes))
    state["fingerprints"] = fingerprints
    state["changed"] = changed
    if new_settled != stored or not isinstance(state.get("processed"), dict):  # else: stored form kept
        by_count: dict[int, list[str]] = {}
        for drop_id, files_n in new_settled.items():
            by_count.setdefault(files_n, []).append(drop_id)
        state["processed"] = {str(n): compact_ids(ids) for n, ids in sorted(by_count.items())}
    state["checked"] = new_checked
    return sorted(rows, key=lambda r: drop_sort_key(str(r["drop"])))


def _recheck_processed(
    state: dict[str, Any], settled: dict[str, int], paths: dict[str, str], fingerprints: dict[str, Any]
) -> dict[str, str]:
    """Processed drop -> why its landing content is not what was processed, after this call's
    round robin (every flagged drop, then others, within :data:`RECHECK_PER_TICK` drops and about
    :data:`RECHECK_BYTES_PER_TICK` bytes)."""
    changed = {d: why for d, why in _dict(state, "changed").items() if d in settled}
    recheck = _recheck_order(sorted(settled, key=drop_sort_key), int(time.time() // 30), set(changed))
    hashed = 0
    for start in range(0, len(recheck), 8):
        batch = recheck[start : start + 8]
        for drop_id, (why, size) in zip(
            batch, pool_map(lambda d: processed_change(d, paths[d], fingerprints), batch), strict=True
        ):
            hashed += size
            if why:
                changed[drop_id] = why
            else:
                changed.pop(drop_id, None)
        if hashed >= RECHECK_BYTES_PER_TICK:
            break  # the rest waits for a later turn
    return changed


def _processed_rows(
    state: dict[str, Any],
    settled: dict[str, int],
    stored: dict[str, int],
    paths: dict[str, str],
    changed: dict[str, str],
    notes: Callable[[str], str] | None,
) -> list[Row]:
    """The rows of the processed drops (``changed after processing`` when flagged); ``notes`` is
    asked once for a drop processed since the last call and remembered in ``state``."""
    noted = {d: n for d, n in _dict(state, "notes").items() if d in settled}
    rows = []
    for drop_id in settled:
        if drop_id not in stored and notes is not None:
            note = notes(drop_id)
            if note:
                noted[drop_id] = note
        why = changed.get(drop_id)
        status = STATUS_CHANGED if why else STATUS_PROCESSED
        rows.append(_row(drop_id, status, why or noted.get(drop_id, ""), settled[drop_id], paths[drop_id]))
    state["notes"] = noted
    return rows


def pool_map(fn: Any, items: list[Any]) -> list[Any]:
    """``[fn(i) for i in items]`` on a few threads (each item is a few object-store requests)."""
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(fn, items))


def _recheck_order(processed: list[str], turn: int, flagged: set[str]) -> list[str]:
    """The processed drops a call checks again: every flagged one, then the ``turn``-th window of
    :data:`RECHECK_PER_TICK` others (the turn comes from the clock, so the state does not change
    when nothing did: 10,000 processed drops cost 100 a call, each checked every 100 turns)."""
    others = [d for d in processed if d not in flagged]
    if len(others) > RECHECK_PER_TICK:
        windows = -(-len(others) // RECHECK_PER_TICK)
        at = (turn % windows) * RECHECK_PER_TICK
        others = others[at : at + RECHECK_PER_TICK]
    return sorted(flagged, key=drop_sort_key) + others


def processed_change(drop_id: str, path: str, fingerprints: dict[str, Any]) -> tuple[str, int]:
    """``(why the landing content of a processed drop is no longer what was processed -- "" when it
    is, bytes hashed)``.

    ``fingerprints[drop_id]`` is ``[content fingerprint, manifest fingerprint]`` as processed (set on
    the first check when missing). The content is hashed (sha256 of every listed file, streamed):
    a same-size edit in place with its mtime put back is flagged as any other.
    """
    manifest, reason = read_manifest(path)
    if manifest is None:
        return f"changed after processing: {reason}; its outputs stay as processed", 0
    size = sum(
        entry["bytes"]
        for entry in manifest.get("files", [])
        if isinstance(entry, dict) and isinstance(entry.get("bytes"), int)
    )
    now = content_fingerprint(path, manifest)[:FP]
    recorded = fingerprints.get(drop_id)
    if not (isinstance(recorded, list) and len(recorded) == 2):
        fingerprints[drop_id] = [now, manifest_fingerprint(manifest)[:FP]]
        return "", size
    if now == recorded[0]:
        return "", size
    status, reason, verified = validate_drop(path, drop_id, verify_checksums=True)
    if status == STATUS_VALID and manifest_fingerprint(verified)[:FP] == recorded[1]:
        # Same manifest, every checksum verified: the bytes are what was processed (a fingerprint
        # recorded by an older version of this code, from stats): recorded anew.
        fingerprints[drop_id] = [now, recorded[1]]
        return "", size
    what = f"now {status}: {reason}" if status != STATUS_VALID else "its manifest lists other files or checksums"
    return (
        f"changed after processing ({what}); its outputs stay as processed -- land the new content as a new "
        "drop id (see docs/curation.md)",
        size,
    )
