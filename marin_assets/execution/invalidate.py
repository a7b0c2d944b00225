"""``python -m marin_assets.execution.invalidate STEP [--prefix P] [--yes]``: mark a step and every
recorded descendant for recomputation, without deleting data.

Without ``--yes`` it prints what would be marked (a dry run) and asks (a piped ``y`` answers too);
no answer only prints. ``STEP`` is a step name (``tokenized/tiny``), ``name-hash`` or an output path, looked up in
the experiment records and in the steps given with ``--steps module:attribute``. See
``marin_assets.execution.maintenance``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from marin_assets.execution.maintenance import (
    apply_invalidation,
    checked_prefix,
    confirm,
    load_steps,
    plan_invalidation,
    steps_of,
)
from marin_resources.storage import default_prefix

DESCRIPTION = (
    "Mark a step and every recorded descendant for recomputation, without deleting data (without --yes "
    "it prints what would be marked and asks)."
)


def main(argv: Sequence[str] | None = None, prog: str = "python -m marin_assets.execution.invalidate") -> int:
    """Run the command line; returns the exit status. ``prog``: the program its usage names
    (``marin invalidate`` passes its own)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("step", help="step name, name-hash or output path")
    parser.add_argument("--prefix", default=None, help="output root (default: $MARIN_PREFIX or ./data)")
    parser.add_argument("--yes", action="store_true", help="apply without asking")
    parser.add_argument("--reason", default="invalidated from the command line")
    parser.add_argument(
        "--steps",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also consider these steps (steps no experiment record lists yet)",
    )
    args = parser.parse_args(argv)
    prefix = checked_prefix(args.prefix or default_prefix())
    try:
        known = [step for spec in args.steps for step in steps_of(load_steps(spec), prefix)]
        plan = plan_invalidation(prefix, args.step, known)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for step in plan.selected:
        print(f"invalidate  {step.name}  {step.output_path}")
    for step in plan.descendants:
        print(f"descendant  {step.name}  {step.output_path}")
    for path, why in plan.refused:
        print(f"refused     {path}  ({why})")
    print(f"{len(plan.targets)} step output(s) would be marked for recomputation (data is kept)")
    if plan.refused:
        return 1
    if not confirm("Mark them?", args.yes):
        print("dry run: nothing changed (pass --yes to apply)")
        return 0
    marked = apply_invalidation(plan, args.reason)
    print(f"marked {len(marked)} output(s); the next run recomputes them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
