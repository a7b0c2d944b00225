"""Per-output status, info and metadata files.

Every output path (or partition path) holds:

* ``.executor_status`` -- JSON ``{"status", "time", "run_id", "host", "pid", "error"?}``; SUCCESS is
  written last, atomically, only after the step function returned, so a step killed at any moment
  never looks finished;
* ``.executor_info`` -- name, function, resolved config, version dict, dependency paths;
* ``.executor_metadata.json`` -- what the step function returned (counts, samples), shown as Dagster
  materialization metadata.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

from marin_assets.execution.storage import atomic_write_text, join_path, read_text

STATUS_FILE = ".executor_status"
INFO_FILE = ".executor_info"
METADATA_FILE = ".executor_metadata.json"
LEASE_FILE = ".executor_lease"

STATUS_SUCCESS = "SUCCESS"
STATUS_FAILED = "FAILED"
STATUS_RUNNING = "RUNNING"
STATUS_DEP_FAILED = "DEP_FAILED"
ALL_STATUSES = (STATUS_SUCCESS, STATUS_FAILED, STATUS_RUNNING, STATUS_DEP_FAILED)


@dataclass(frozen=True)
class StatusRecord:
    """The parsed content of a status file."""

    status: str
    time: float = 0.0
    run_id: str | None = None
    host: str | None = None
    pid: int | None = None
    error: str | None = None


def status_path(output_path: str) -> str:
    """Path of the status file of ``output_path``."""
    return join_path(output_path, STATUS_FILE)


def read_status(output_path: str) -> StatusRecord | None:
    """The status of ``output_path``, or None when it never started."""
    text = read_text(status_path(output_path))
    if text is None:
        return None
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
    )


# Marin's event-log statuses that mean "someone was on it"; CANCELLED / UNKNOWN mean "run it again".
_MARIN_EVENT_STATUSES = {"WAITING": STATUS_RUNNING, **{s: s for s in ALL_STATUSES}}


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


def write_status(output_path: str, status: str, run_id: str | None = None, error: str | None = None) -> None:
    """Atomically record ``status`` for ``output_path``."""
    if status not in ALL_STATUSES:
        raise ValueError(f"unknown status {status!r}")
    record: dict[str, Any] = {
        "status": status,
        "time": time.time(),
        "run_id": run_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    if error is not None:
        record["error"] = error[-4000:]
    atomic_write_text(status_path(output_path), json.dumps(record))


def write_json(path: str, data: Any) -> None:
    """Atomically write ``data`` as indented JSON (unknown objects are written as strings)."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def read_json(path: str) -> Any | None:
    """Parsed JSON at ``path``, or None when missing or unreadable."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def read_info(output_path: str) -> dict[str, Any] | None:
    """The ``.executor_info`` of ``output_path``, or None."""
    return read_json(join_path(output_path, INFO_FILE))


def read_metadata(output_path: str) -> dict[str, Any]:
    """The metadata a step returned for ``output_path`` (empty when none)."""
    data = read_json(join_path(output_path, METADATA_FILE))
    return data if isinstance(data, dict) else {}
