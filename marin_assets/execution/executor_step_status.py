"""Marin's ``marin.execution.executor_step_status`` names, over this engine's status files.

Marin's older executor kept ``<output>/.executor_status`` as a JSON-lines log of events
(``{"date", "status", "message", "ray_task_id"}``, the last one current); this engine writes one JSON
object (``status.py``) and reads both. Scripts and tools written for Marin that import these names
get the current status of any output either way; :func:`append_status` writes Marin's event format
(the engine reads it back: WAITING counts as RUNNING, CANCELLED / UNKNOWN as never started).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from marin_assets.execution.status import (
    STATUS_CANCELLED,
    STATUS_DEP_FAILED,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    STATUS_WAITING,
    parse_status,
    status_path,
)
from marin_assets.execution.storage import atomic_write_text, read_text

STATUS_UNKNOWN = "UNKNOWN"

__all__ = [
    "STATUS_CANCELLED",
    "STATUS_DEP_FAILED",
    "STATUS_FAILED",
    "STATUS_RUNNING",
    "STATUS_SUCCESS",
    "STATUS_UNKNOWN",
    "STATUS_WAITING",
    "ExecutorStepEvent",
    "append_status",
    "get_current_status",
    "get_latest_status_from_gcs",
    "get_status_path",
    "read_events",
]


@dataclass(frozen=True)
class ExecutorStepEvent:
    """One change of a step's status (Marin's event-log line)."""

    date: str
    status: str
    message: str | None = None
    ray_task_id: str | None = None


def get_status_path(output_path: str) -> str:
    """``<output_path>/.executor_status``."""
    return status_path(output_path)


def read_events(path: str) -> list[ExecutorStepEvent]:
    """The events of the status file at ``path`` (this engine's one-object file reads as one event)."""
    text = read_text(path)
    if text is None or not text.strip():
        return []
    events: list[ExecutorStepEvent] = []
    for line in text.strip().splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and "date" in data and "status" in data:
            events.append(ExecutorStepEvent(**{k: data.get(k) for k in ("date", "status", "message", "ray_task_id")}))
    if events:
        return events
    record = parse_status(text)
    if record is None:
        return []
    date = datetime.fromtimestamp(record.time).isoformat() if record.time else ""
    return [ExecutorStepEvent(date=date, status=record.status, message=record.error, ray_task_id=record.run_id)]


def get_current_status(events: list[ExecutorStepEvent]) -> str | None:
    """The most recent status (last event), None when there is none."""
    return events[-1].status if events else None


def get_latest_status_from_gcs(output_path: str) -> str | None:
    """The current status of ``output_path`` as the engine reads it (None: never started)."""
    record = parse_status(read_text(get_status_path(output_path)))
    return record.status if record is not None else None


def append_status(path: str, status: str, message: str | None = None, ray_task_id: str | None = None) -> None:
    """Append an event to the status file at ``path`` in Marin's JSON-lines format (rewritten whole,
    atomically: object stores cannot append)."""
    events = [e for e in read_events(path) if e.date]
    events.append(ExecutorStepEvent(datetime.now().isoformat(), status, message, ray_task_id))
    atomic_write_text(path, "".join(json.dumps(asdict(e)) + "\n" for e in events))
