"""What a run reports: per-unit outcomes, the run's report, its errors, and the runner's options."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.lease import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S


class StepFailedError(RuntimeError):
    """A step function raised, or the step was FAILED before and not forced."""


class ExecutorError(RuntimeError):
    """The run finished with failed steps; ``failed`` lists ``(name, output path, error)``, ``report``
    every unit's outcome (the failed ones included)."""

    def __init__(self, failed: list[tuple[str, str, str]], report: ExecutionReport | None = None) -> None:
        self.failed = failed
        self.report = report
        lines = "\n".join(
            f"  - {name} ({path}): {error.strip().splitlines()[-1] if error.strip() else '?'}"
            for name, path, error in failed
        )
        super().__init__(f"{len(failed)} step(s) failed:\n{lines}")


@dataclass(frozen=True)
class ExecutorOptions:
    """How the runner behaves.

    Attributes:
        force_run_failed: re-run steps whose status is FAILED instead of raising.
        max_concurrent: how many units run at once (threads; Ray steps run on Ray).
        heartbeat_s / stale_s: lease heartbeat period and the age after which a lease is stale.
        poll_s: how often a waiting runner looks at a step another runner is computing.
        run_id: recorded in every status file this run writes.
    """

    force_run_failed: bool = False
    max_concurrent: int = 4
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stale_s: float = DEFAULT_STALE_S
    poll_s: float = 0.5
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])


@dataclass
class StepOutcome:
    """What happened to one unit."""

    name: str
    output_path: str
    partition: str | None
    action: str  # "ran" | "cached" | "waited" | "failed" | "dep_failed" | "abandoned" (lease lost upstream)
    seconds: float = 0.0
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecutionReport:
    """Outcomes of a run, in completion order."""

    run_id: str
    outcomes: list[StepOutcome] = field(default_factory=list)

    def by_action(self, action: str) -> list[StepOutcome]:
        """Outcomes with the given action."""
        return [o for o in self.outcomes if o.action == action]

    @property
    def failed(self) -> list[StepOutcome]:
        return [o for o in self.outcomes if o.action in ("failed", "dep_failed")]
