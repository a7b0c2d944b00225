"""``invalidate`` and ``gc`` as Dagster jobs (the logic lives in ``execution.maintenance``).

Both are dry runs unless their config says ``apply: true``: launch once to see the plan in the
run's logs and metadata, then launch again with ``apply: true`` to act on it. ``gc_job`` also keeps
the outputs of every step of this code location's experiments (Dagster materializations write no
experiment record).
"""

import dagster as dg
from pydantic import Field

from marin_assets.execution.discovery import discovered_experiments
from marin_assets.execution.maintenance import (
    apply_gc,
    apply_invalidation,
    plan_gc,
    plan_invalidation,
    step_outputs_of,
    steps_of,
)
from marin_resources.dagster_resources import MarinStorageResource


class InvalidateConfig(dg.Config):
    """Which step to invalidate, and whether to act or only show the plan."""

    step: str = Field(description="step name, name-hash or output path")
    apply: bool = False
    reason: str = "invalidated from Dagster"


class GcConfig(dg.Config):
    """Whether to delete the unreferenced outputs or only list them."""

    apply: bool = False


@dg.op(description="Mark a step and every recorded descendant for recomputation (data kept)")
def invalidate_step(
    context: dg.OpExecutionContext, config: InvalidateConfig, marin_storage: MarinStorageResource
) -> None:
    prefix = marin_storage.root()
    known = [step for e in discovered_experiments() for step in steps_of(e.steps, prefix, e.partitions)]
    try:
        plan = plan_invalidation(prefix, config.step, known)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    targets = [s.output_path for s in plan.targets]
    for path in targets:
        context.log.info(f"{'invalidate' if config.apply else 'would invalidate'}: {path}")
    if plan.refused:
        raise dg.Failure(f"steps are being computed under a live lease: {plan.refused}")
    marked = apply_invalidation(plan, config.reason) if config.apply else []
    context.add_output_metadata(
        {"targets": dg.MetadataValue.json(targets), "marked": len(marked), "applied": config.apply}
    )


@dg.op(description="List (and with apply: true delete) outputs no experiment record references")
def gc_outputs(context: dg.OpExecutionContext, config: GcConfig, marin_storage: MarinStorageResource) -> None:
    # A step of the code location that never ran has no experiment record yet: keep every one of them.
    prefix = marin_storage.root()
    keep = [path for e in discovered_experiments() for path in step_outputs_of(e.steps, prefix, e.partitions)]
    plan = plan_gc(prefix, keep)
    for path in plan.unreferenced:
        context.log.info(f"{'delete' if config.apply else 'unreferenced'}: {path}")
    deleted = apply_gc(plan) if config.apply else []
    context.add_output_metadata(
        {
            "unreferenced": dg.MetadataValue.json(plan.unreferenced),
            "kept_live": dg.MetadataValue.json(plan.kept_live),
            "deleted": len(deleted),
            "applied": config.apply,
        }
    )


@dg.job(description="Invalidate a step and its descendants (dry run unless apply: true)")
def invalidate_step_job() -> None:
    invalidate_step()


@dg.job(description="Garbage-collect outputs no experiment references (dry run unless apply: true)")
def gc_job() -> None:
    gc_outputs()


MAINTENANCE_JOBS = [invalidate_step_job, gc_job]
