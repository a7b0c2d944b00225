"""What an experiment script declares (no Dagster import, no I/O): :class:`Experiment`, its
checks and schedules, and where the keys of its partition sets come from.

A partition set's keys come from a *declared* source: the experiment's ``partitions`` (or
``executor_main(partitions=...)`` / ``--partitions``), else the ``partition_source`` of a step
partitioned by the set -- the step that reads the data declares it (the raw step of a curation
pipeline declares its landing zone's drops, :class:`~marin_assets.landing.zone.LandingDrops`).
The engine never guesses a source from a config's field names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from marin_assets.execution.step import ExecutorStep, PartitionSource
from marin_assets.execution.step_walk import walk_steps


@dataclass(frozen=True)
class StepCheck:
    """A data-quality check on a step's output (a Dagster asset check in the code location).

    ``fn(output_path, partition, prefix) -> (passed, metadata)`` is plain Python (stage packages
    own the logic); it runs right after every materialization, cached ones included.
    """

    step: ExecutorStep
    name: str
    fn: Callable[[str, str | None, str], tuple[bool, dict[str, Any]]]
    description: str | None = None
    blocking: bool = False


@dataclass(frozen=True)
class StepSchedule:
    """Re-materialize some steps on a cron schedule (e.g. re-train and re-evaluate nightly).

    Unchanged steps are recorded as cached, so a tick without new data costs seconds; a step whose
    version changed (a new drop reached the training mixture) is recomputed into its new path.
    """

    name: str
    cron: str
    steps: Sequence[ExecutorStep]
    description: str | None = None
    default_status: Literal["stopped", "running"] = "stopped"
    """Whether the schedule runs once the location loads (``running``) or waits to be turned on in
    the UI (``stopped``, Dagster's default for schedules)."""

    def __post_init__(self) -> None:
        if self.default_status not in ("stopped", "running"):
            raise ValueError(f"StepSchedule {self.name!r}: default_status must be 'stopped' or 'running'")


@dataclass(frozen=True)
class Experiment:
    """A named list of steps, shown as one asset group.

    Attributes:
        name: group name in the UI (letters, digits, underscores); a discovered script's is its name.
        steps: the experiment's steps; everything they depend on is included.
        description: shown on the job.
        partitions: partition-set name -> keys, or a callable ``prefix -> keys``. A partition set
            with no source here gets the one its steps declare (``ExecutorStep.partition_source``,
            see :func:`partition_sources`).
        checks: asset checks on some of the steps.
        schedules: cron schedules over some of the steps.
        eager_steps: steps materialized by declarative automation as soon as their inputs update.
        heartbeat_s / stale_s: lease settings for materializations.
        max_concurrent: how many of its steps a Dagster run runs at once (None: every ready step,
            as ``executor_main``; ``$MARIN_MAX_CONCURRENT`` or the run tag ``marin/max_concurrent``
            may lower it).
        job: also define an asset job ``<name>_job`` over the group. A script that declares no
            ``EXPERIMENT`` gets none: each job costs Dagster a pass over the whole asset graph at
            load (100 scripts, 100 passes), and the group's *Materialize all* needs no job.
    """

    name: str = ""
    steps: Sequence[ExecutorStep] = ()
    description: str | None = None
    partitions: Mapping[str, PartitionSource] = field(default_factory=dict)
    checks: Sequence[StepCheck] = ()
    eager_steps: Sequence[ExecutorStep] = ()
    schedules: Sequence[StepSchedule] = ()
    heartbeat_s: float = 30.0
    stale_s: float = 90.0
    job: bool = True
    max_concurrent: int | None = None


def declared_partition_sources(partitioned: Sequence[ExecutorStep]) -> dict[str, PartitionSource]:
    """Partition set -> the source its steps declare (``partition_source``), for the given steps.

    Raises:
        ValueError: two steps of one set declare different sources (two landing zones sharing a
            set would mix their drops: give each source its own set).
    """
    found: dict[str, tuple[PartitionSource, str]] = {}
    for step in partitioned:
        source = step.partition_source
        if step.partitioned_by is None or source is None:
            continue
        before = found.get(step.partitioned_by)
        if before is None:
            found[step.partitioned_by] = (source, step.name)
        elif before[0] != source:
            raise ValueError(
                f"partition set {step.partitioned_by!r} has two sources: {before[0]!r} (step {before[1]!r}) and "
                f"{source!r} (step {step.name!r}); give each source its own partition set (partitioned_by=...)"
            )
    return {name: source for name, (source, _) in found.items()}


def partition_sources(
    steps: Sequence[ExecutorStep],
    given: Mapping[str, PartitionSource] | None = None,
    partitioned: Sequence[ExecutorStep] | None = None,
) -> dict[str, PartitionSource]:
    """``given`` plus, for each partition set without a source, the source its steps declare.

    ``partitioned``: the partitioned steps among ``steps`` and their inputs, when the caller has them
    resolved already (else the steps' configs are walked).

    Raises:
        ValueError: a partition set has no source, given or declared; the message says what to pass.
    """
    sources = dict(given or {})
    partitioned = [s for s in walk_steps(steps) if s.partitioned_by] if partitioned is None else partitioned
    missing = sorted({s.partitioned_by for s in partitioned if s.partitioned_by not in sources})
    if not missing:
        return sources
    declared = declared_partition_sources([s for s in partitioned if s.partitioned_by in missing])
    for name in missing:
        if name not in declared:
            raise ValueError(
                f"steps are partitioned by {name!r} but no partition keys were given and none of them declares a "
                f"partition source (`partition_source=` of the step that reads the data, e.g. "
                f"LandingDrops('landing/<source>')): pass partitions={{{name!r}: [...keys]}} (or a callable "
                f"prefix -> keys) to executor_main / Experiment, or --partitions {name}=k1,k2"
            )
        sources[name] = declared[name]
    return sources


def describe_source(source: PartitionSource) -> str:
    """A short text naming a partition source (for logs)."""
    if isinstance(source, (list, tuple)):
        return f"{len(source)} given key(s)"
    return getattr(source, "__qualname__", None) or repr(source)
