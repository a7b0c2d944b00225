"""What a run reports: per-unit outcomes, the run's report, its errors, and the runner's options."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.events import Done, EventListener, Failed, NotRun, StepEvent
from marin_assets.execution.lease import DEFAULT_HEARTBEAT_S, DEFAULT_STALE_S
from marin_resources.secret_rule import is_secret_name


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
        description: what runs, in words a person finds the run by (``dagster run <id> (<job>)``,
            ``executor_main <script>``): the Ray driver's job is named so.
        listeners: told every event of the run (:mod:`marin_assets.execution.events`), in order,
            from the thread that emits it: the console, the Dagster op, a test.
        secret_name_rule: which config field / environment variable names hold secrets (kept out of
            Ray's runtime_env, hidden in records).
    """

    force_run_failed: bool = False
    max_concurrent: int = 4
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    stale_s: float = DEFAULT_STALE_S
    poll_s: float = 0.5
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    description: str | None = None
    listeners: tuple[EventListener, ...] = ()
    secret_name_rule: Callable[[str], bool] = field(default=is_secret_name)


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

    def record(self, event: StepEvent) -> None:
        """A listener of the run's stream: every unit's end is one outcome (the recorder reads them)."""
        if isinstance(event, Done):
            outcome = StepOutcome(
                event.step, event.output_path, event.partition, event.action, event.seconds, None, dict(event.metadata)
            )
        elif isinstance(event, Failed):
            outcome = StepOutcome(
                event.step, event.output_path, event.partition, "failed", event.seconds, event.error or event.cause
            )
        elif isinstance(event, NotRun):
            outcome = StepOutcome(event.step, event.output_path, event.partition, event.action)
        else:
            return
        self.outcomes.append(outcome)

    def by_action(self, action: str) -> list[StepOutcome]:
        """Outcomes with the given action."""
        return [o for o in self.outcomes if o.action == action]

    @property
    def failed(self) -> list[StepOutcome]:
        return [o for o in self.outcomes if o.action in ("failed", "dep_failed")]
