"""How failed steps read in Dagster: the real cause first, then which step and where.

A step's failure names its cause (the last line of the traceback the engine recorded) on the
first line, above Dagster's own stack trace; the whole traceback is in ``marin/error``. A run in
which several steps failed fails once, at the end, with one such line per failed step, and says
which steps did not run because an input failed (recorded DEP_FAILED).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from marin_assets.dagster_bridge.metadata import uri_metadata
from marin_assets.execution.status import read_status


@dataclass(frozen=True)
class FailedStep:
    """One unit that failed in this run: its label, output folder and the error the engine raised."""

    label: str
    output_path: str
    error: str


def failure_cause(output_path: str, error: str) -> tuple[str, str]:
    """(the cause's one line, the full recorded traceback or the error) of a failed unit."""
    status = read_status(output_path)
    recorded = status.error if status is not None and status.error else ""
    lines = [line.strip() for line in recorded.strip().splitlines() if line.strip()]
    cause = lines[-1] if lines else (error.strip().splitlines() or ["unknown error"])[0]
    return cause, recorded or error


def failure_line(failed: FailedStep) -> str:
    """``<cause>  [step <label>, output <path>]``."""
    cause, _ = failure_cause(failed.output_path, failed.error)
    return f"{cause}  [step {failed.label}, output {failed.output_path}]"


def run_failure(failed: Sequence[FailedStep], not_run: Sequence[tuple[str, str]] = ()) -> dg.Failure:
    """The failure of a run whose ``failed`` steps failed; ``not_run`` is (label, failed input) of
    each step skipped because an input failed. One line per failed step, cause first."""
    lines = [failure_line(f) for f in failed]
    if len(failed) > 1:
        lines.append(f"({len(failed)} steps failed; every other selected step ran)")
    if not_run:
        shown = ", ".join(f"{label} (input {cause} failed)" for label, cause in not_run[:20])
        more = f" and {len(not_run) - 20} more" if len(not_run) > 20 else ""
        lines.append(f"not run (DEP_FAILED): {shown}{more}")
    errors = []
    for f in failed:
        _, recorded = failure_cause(f.output_path, f.error)
        errors.append(f"## {f.label}\n```\n{recorded[-20000 // max(1, len(failed)) :]}\n```")
    metadata = {"marin/error": dg.MetadataValue.md("\n\n".join(errors))}
    if len(failed) == 1:
        metadata["dagster/uri"] = uri_metadata(failed[0].output_path)
    return dg.Failure(description="\n".join(lines), metadata=metadata, allow_retries=False)
