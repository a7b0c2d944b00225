"""Type-check the product code (mypy, configured in pyproject.toml) against the committed baseline.

The baseline (``scripts/mypy_baseline.txt``) holds the errors the code had when the checker was
introduced, one per line as ``path: [code] message`` (no line numbers, so edits elsewhere in a file
do not move them). A run fails on any error beyond the baseline -- a new one, or one more of a kind
the file already had -- and lists it with its line; fixed errors only shrink what is allowed
(``--update`` rewrites the baseline, to be committed with the fix).

    .venv/bin/python scripts/typecheck.py            # check (scripts/typecheck.sh, run by scripts/test.sh)
    .venv/bin/python scripts/typecheck.py --update   # after fixing errors: write the smaller baseline
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / "scripts" / "mypy_baseline.txt"
ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):(?P<line>\d+): error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")


def run_mypy() -> tuple[int, list[tuple[str, str]]]:
    """mypy's exit status and its errors as (baseline key, the line as mypy printed it)."""
    env = {**os.environ, "MYPY_CACHE_DIR": os.environ.get("MYPY_CACHE_DIR", str(REPO / ".mypy_cache"))}
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    errors = parse(proc.stdout)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not errors):
        # mypy itself failed (a crash, a bad config): that is no type error to compare.
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy failed to run (exit status {proc.returncode})")
    return proc.returncode, errors


def parse(output: str) -> list[tuple[str, str]]:
    """mypy's error lines as (baseline key, the line as mypy printed it)."""
    errors = []
    for line in output.splitlines():
        match = ERROR.match(line)
        if match:
            errors.append((f"{match['path']}: [{match['code']}] {match['message']}", line))
    return errors


def beyond(errors: list[tuple[str, str]], baseline: list[str]) -> list[str]:
    """The lines of ``errors`` the baseline does not allow (a key allowed n times, the n first)."""
    allowed = collections.Counter(baseline)
    seen: collections.Counter[str] = collections.Counter()
    new = []
    for key, line in errors:
        seen[key] += 1
        if seen[key] > allowed[key]:
            new.append(line)
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="write the current errors as the baseline")
    args = parser.parse_args(argv)
    _, errors = run_mypy()
    current = collections.Counter(key for key, _ in errors)
    if args.update:
        BASELINE.write_text("".join(f"{key}\n" for key in sorted(current.elements())), encoding="utf-8")
        print(f"typecheck: baseline written, {sum(current.values())} error(s): {BASELINE.relative_to(REPO)}")
        return 0
    baseline = BASELINE.read_text(encoding="utf-8").splitlines() if BASELINE.exists() else []
    new = beyond(errors, baseline)
    fixed = collections.Counter(baseline) - current
    if new:
        print(f"typecheck: {len(new)} new type error(s) (not in {BASELINE.relative_to(REPO)}):")
        print("".join(f"  {line}\n" for line in new), end="")
        return 1
    note = f"; {sum(fixed.values())} fixed (run with --update to shrink the baseline)" if fixed else ""
    print(f"typecheck: no new type errors ({sum(current.values())} in the baseline{note})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
