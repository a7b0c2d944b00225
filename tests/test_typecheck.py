"""``scripts/typecheck.py`` fails on a type error beyond the committed baseline, not on one in it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("typecheck", REPO / "scripts" / "typecheck.py")
assert _spec is not None and _spec.loader is not None
typecheck = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(typecheck)

OUTPUT = """\
marin_assets/a.py:10: error: Incompatible types in assignment (expression has type "str", variable has type "int")  [assignment]
marin_assets/a.py:20: error: Incompatible types in assignment (expression has type "str", variable has type "int")  [assignment]
marin_assets/a.py:30: note: a note is no error
marin_resources/b.py:5: error: Name "x" is not defined  [name-defined]
"""


def test_errors_beyond_the_baseline_fail_those_in_it_do_not():
    errors = typecheck.parse(OUTPUT)
    assert [key for key, _ in errors] == [
        'marin_assets/a.py: [assignment] Incompatible types in assignment (expression has type "str", variable has type "int")',
        'marin_assets/a.py: [assignment] Incompatible types in assignment (expression has type "str", variable has type "int")',
        'marin_resources/b.py: [name-defined] Name "x" is not defined',
    ]
    baseline = [errors[0][0], errors[2][0]]  # the file had one such assignment error when the baseline was written
    assert typecheck.beyond(errors, baseline) == [errors[1][1]]  # the second one is new: its line is shown
    assert typecheck.beyond(errors, [key for key, _ in errors]) == []


def test_the_committed_baseline_holds_keys_only():
    lines = (REPO / "scripts" / "mypy_baseline.txt").read_text(encoding="utf-8").splitlines()
    assert lines and all(typecheck.ERROR.match(line) is None and ": [" in line for line in lines)
