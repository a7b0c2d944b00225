"""Import a test project's own ``experiments`` package, whatever an earlier test of this process imported.

``import experiments`` resolves through ``marin_alias``: once any test has imported ``experiments``
(Marin's built-in registries, or another test project's), ``sys.modules`` answers every later import
with that package. A test that wants *its* project's scripts sets the others aside first.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _experiments_modules() -> list[str]:
    return [name for name in sys.modules if name.split(".")[0] == "experiments"]


@contextmanager
def team_experiments(project: Path) -> Iterator[None]:
    """Inside, ``import experiments.X`` imports ``project/experiments/X.py`` afresh; afterwards the
    modules imported before are back and the project's are gone."""
    others = {name: sys.modules.pop(name) for name in _experiments_modules()}
    saved_root = os.environ.get("MARIN_PROJECT_ROOT")
    os.environ["MARIN_PROJECT_ROOT"] = str(project)
    try:
        yield
    finally:
        if saved_root is None:
            os.environ.pop("MARIN_PROJECT_ROOT", None)
        else:
            os.environ["MARIN_PROJECT_ROOT"] = saved_root
        for name in _experiments_modules():
            del sys.modules[name]
        sys.modules.update(others)
