"""Per-output status, info and metadata files.

Every output path (or partition path) holds:

* ``.executor_status`` -- JSON ``{"status", "time", "run_id", "host", "pid", "error"?}``; SUCCESS is
  written last, atomically, only after the step function returned, so a step killed at any moment
  never looks finished. The runner writes it as one object with a precondition
  (:func:`write_status_if`: compare-and-swap on the token it last wrote), so a runner whose lease
  was taken over cannot flip the status the new holder wrote;
* ``.executor_info`` -- name, function, resolved config, version dict, dependency paths;
* ``.executor_metadata.json`` -- what the step function returned (counts, samples), shown as Dagster
  materialization metadata.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fsspec.implementations.local import LocalFileSystem

from marin_assets.execution.secrets import redact_secrets
from marin_assets.execution.storage import atomic_write_text, filesystem, join_path, read_json, read_text

if TYPE_CHECKING:
    from marin_assets.execution.conditional import LeaseBackend

logger = logging.getLogger(__name__)

STATUS_FILE = ".executor_status"
INFO_FILE = ".executor_info"
METADATA_FILE = ".executor_metadata.json"
LEASE_FILE = ".executor_lease"

STATUS_SUCCESS = "SUCCESS"
STATUS_FAILED = "FAILED"
STATUS_RUNNING = "RUNNING"
STATUS_DEP_FAILED = "DEP_FAILED"
ALL_STATUSES = (STATUS_SUCCESS, STATUS_FAILED, STATUS_RUNNING, STATUS_DEP_FAILED)
# Only read, in Marin's older event logs: waiting for dependencies (counts as RUNNING) and cancelled
# or unknown to Ray (counts as never started).
STATUS_WAITING = "WAITING"
STATUS_CANCELLED = "CANCELLED"


@dataclass(frozen=True)
class StatusRecord:
    """The parsed content of a status file."""

    status: str
    time: float = 0.0
    run_id: str | None = None
    host: str | None = None
    pid: int | None = None
    error: str | None = None
    attempt: str | None = None  # the staging folder of the attempt that wrote it (execution.attempt)
    # An attempt whose holder may still be alive (taken over while stale), being copied into a new
    # attempt: a runner that finds this adopts it by copying too, never in place.
    copying_from: str | None = None


HOST_ID_ENV = "MARIN_HOST_ID"


def host_id() -> str:
    """This host's identity in leases and statuses: ``$MARIN_HOST_ID`` when set, else the hostname.

    The override lets tests run two "hosts" on one machine (a holder on another host is never
    provably dead, only stale); on real machines the hostname is the identity.
    """
    return os.environ.get(HOST_ID_ENV) or socket.gethostname()


def status_path(output_path: str) -> str:
    """Path of the status file of ``output_path``."""
    return join_path(output_path, STATUS_FILE)


def parse_status(text: str | bytes | None) -> StatusRecord | None:
    """Parse the content of a status file (None when missing or unreadable)."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    text = text.strip()
    if text in ALL_STATUSES:  # plain-word files, as older Marin versions wrote them
        return StatusRecord(status=text)
    lines = text.splitlines()
    if len(lines) > 1:
        return _read_marin_event_log(lines)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    if isinstance(data, dict) and "date" in data and "time" not in data:
        return _read_marin_event_log(lines)
    if not isinstance(data, dict) or data.get("status") not in ALL_STATUSES:
        return None
    return StatusRecord(
        status=data["status"],
        time=float(data.get("time", 0.0)),
        run_id=data.get("run_id"),
        host=data.get("host"),
        pid=data.get("pid"),
        error=data.get("error"),
        attempt=data.get("attempt"),
        copying_from=data.get("copying_from"),
    )


# Marin's event-log statuses that mean "someone was on it"; CANCELLED / UNKNOWN mean "run it again".
_MARIN_EVENT_STATUSES = {STATUS_WAITING: STATUS_RUNNING, **{s: s for s in ALL_STATUSES}}


def _read_marin_event_log(lines: list[str]) -> StatusRecord | None:
    """The current status of a Marin JSON-lines event log (one ``{"date", "status", ...}`` per line).

    Marin appends an event per change; the last parsable line is the current status.
    """
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(event, dict) or "status" not in event:
            continue
        status = _MARIN_EVENT_STATUSES.get(str(event["status"]))
        if status is None:
            return None
        try:
            when = datetime.datetime.fromisoformat(str(event.get("date"))).timestamp()
        except ValueError:
            when = 0.0
        return StatusRecord(status=status, time=when, run_id=event.get("ray_task_id"), error=event.get("message"))
    return None


def read_status(output_path: str) -> StatusRecord | None:
    """The status of ``output_path``, or None when it never started."""
    return parse_status(read_text(status_path(output_path)))


def read_statuses(output_paths: list[str]) -> dict[str, StatusRecord | None]:
    """Statuses of many outputs at once (one concurrent batch of reads per object store)."""
    from marin_assets.execution.storage import read_many

    contents = read_many([status_path(p) for p in output_paths])
    return {p: parse_status(contents.get(status_path(p))) for p in output_paths}


def _status_bytes(
    status: str, run_id: str | None, error: str | None, attempt: str | None = None, copying_from: str | None = None
) -> bytes:
    if status not in ALL_STATUSES:
        raise ValueError(f"unknown status {status!r}")
    record: dict[str, Any] = {
        "status": status,
        "time": time.time(),
        "run_id": run_id,
        "host": host_id(),
        "pid": os.getpid(),
    }
    if error is not None:
        record["error"] = error[-4000:]
    if attempt is not None:
        record["attempt"] = attempt
    if copying_from is not None:
        record["copying_from"] = copying_from
    return json.dumps(record).encode("utf-8")


def write_status(output_path: str, status: str, run_id: str | None = None, error: str | None = None) -> None:
    """Atomically record ``status`` for ``output_path`` (unconditionally: tools and tests)."""
    atomic_write_text(status_path(output_path), _status_bytes(status, run_id, error).decode("utf-8"))


def read_status_with_token(output_path: str, backend: LeaseBackend) -> tuple[StatusRecord | None, str | None]:
    """The status and its token (None, None when there is no status file)."""
    current = backend.read(status_path(output_path))
    if current is None:
        return None, None
    return parse_status(current[0]), current[1]


def write_status_if(
    output_path: str,
    status: str,
    token: str | None,
    backend: LeaseBackend,
    run_id: str | None = None,
    error: str | None = None,
    attempt: str | None = None,
    copying_from: str | None = None,
) -> str | None:
    """Record ``status`` only if the status file is still at ``token`` (None: still absent).

    One object, one conditional request: a generation precondition on GCS, a compare-and-swap on
    a filesystem. Returns the new token, or None when someone else changed the file meanwhile.
    """
    path = status_path(output_path)
    data = _status_bytes(status, run_id, error, attempt, copying_from)
    if token is None:
        return backend.create_exclusive(path, data)
    return backend.replace_if(path, token, data)


def non_finite_text(value: float) -> str:
    """How a NaN or infinite float is written: ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (the
    spelling of Python's JSON extension, as a JSON string)."""
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def finite(value: Any) -> Any:
    """``value`` with every NaN/Infinity float inside it (dict values, list items) spelled as text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def is_non_finite_error(exc: ValueError) -> bool:
    """json's error for a NaN/Infinity float under ``allow_nan=False`` (not a circular reference)."""
    return "Out of range float" in str(exc)


def json_text(data: Any, indent: int | None = 2) -> str:
    """``data`` as valid JSON text: sorted keys, unknown objects as strings, and a NaN or infinite
    float as the string ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` -- never the bare token
    :mod:`json` writes by default, which other JSON readers (and ``jq``) reject."""
    try:
        return json.dumps(data, indent=indent, sort_keys=True, default=str, allow_nan=False)
    except ValueError as exc:
        if not is_non_finite_error(exc):
            raise
        return json.dumps(finite(data), indent=indent, sort_keys=True, default=str, allow_nan=False)


def write_json(path: str, data: Any) -> None:
    """Atomically write ``data`` as indented, valid JSON (:func:`json_text`)."""
    atomic_write_text(path, json_text(data))


STALE_TEMPORARY_S = 600.0
"""A writer's hidden ``.tmp-*`` file this old was left by a killed process (a live write takes seconds)."""


def sweep_stale_temporaries(folder: str, max_age_s: float = STALE_TEMPORARY_S) -> list[str]:
    """Delete the ``.tmp-*`` files of a local ``folder`` older than ``max_age_s`` -- what a process
    killed inside an atomic write leaves (readers skip hidden names anyway); return their names.
    Object stores write an object in one request: nothing to sweep there."""
    fs, p = filesystem(folder)
    if not isinstance(fs, LocalFileSystem):
        return []
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(p))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for entry in entries:
        if not entry.name.startswith(".tmp-") or not entry.is_file(follow_symlinks=False):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > max_age_s:
                os.unlink(entry.path)
                removed.append(entry.name)
        except FileNotFoundError:  # its writer finished (renamed it) or another sweep took it
            continue
    if removed:
        logger.info("%s: removed %d stale temporary file(s) of killed writers: %s", folder, len(removed), removed[:5])
    return removed


def _read_record(path: str) -> Any | None:
    """A runner-written record, or None when it is missing or unreadable (a half-written or
    foreign file is shown as absent, never fails a status page)."""
    try:
        return read_json(path)
    except FileNotFoundError:
        return None
    except ValueError as exc:
        logger.warning("%s", exc)
        return None


def read_info(output_path: str) -> dict[str, Any] | None:
    """The ``.executor_info`` of ``output_path``, or None (missing or unreadable)."""
    data = _read_record(join_path(output_path, INFO_FILE))
    return data if isinstance(data, dict) else None


def read_metadata(output_path: str) -> dict[str, Any]:
    """The metadata a step returned for ``output_path`` (empty when none)."""
    data = _read_record(join_path(output_path, METADATA_FILE))
    return redact_secrets(data) if isinstance(data, dict) else {}
