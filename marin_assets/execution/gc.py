"""``python -m marin_assets.execution.gc [--prefix P] [--yes]``: list step outputs under the prefix
that no recorded experiment references, then delete them on confirmation.

Without ``--yes`` it lists and asks (a piped ``y`` answers too); no answer only lists. Outputs under
a live lease are never deleted; ``--keep module:attribute`` keeps the outputs of those steps too (steps no record
lists yet, e.g. run only through ``run_steps``). See ``marin_assets.execution.maintenance``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from marin_assets.execution.maintenance import apply_gc, checked_prefix, confirm, load_steps, plan_gc, step_outputs_of
from marin_resources.storage import default_prefix

DESCRIPTION = (
    "List step outputs under the prefix that no recorded experiment references, then delete them on "
    "confirmation (without --yes it lists and asks; outputs under a live lease are never deleted)."
)


def main(argv: Sequence[str] | None = None, prog: str = "python -m marin_assets.execution.gc") -> int:
    """Run the command line; returns the exit status. ``prog``: the program its usage names
    (``marin gc`` passes its own)."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    parser.add_argument("--prefix", default=None, help="output root (default: $MARIN_PREFIX or ./data)")
    parser.add_argument("--yes", action="store_true", help="delete without asking")
    parser.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also keep the outputs of these steps (e.g. marin_assets.experiments.hello_world:STEPS)",
    )
    args = parser.parse_args(argv)
    prefix = checked_prefix(args.prefix or default_prefix())
    keep = [path for spec in args.keep for path in step_outputs_of(load_steps(spec), prefix)]
    plan = plan_gc(prefix, keep)
    for output in plan.unreferenced:
        print(f"unreferenced  {output}")
    for output in plan.kept_live:
        print(f"live (kept)   {output}")
    print(f"{len(plan.unreferenced)} unreferenced output(s); {plan.referenced} referenced by experiment records")
    if not plan.unreferenced or not confirm("Delete them?", args.yes):
        print("dry run: nothing deleted (pass --yes to delete)" if plan.unreferenced else "nothing to collect")
        return 0
    deleted = apply_gc(plan)
    print(f"deleted {len(deleted)} output(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
