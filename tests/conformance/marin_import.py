"""Run an experiment script written for Marin here: as written (the import alias), or with its
imports changed textually (the documented fallback).

As written: ``marin_alias.pth`` installs ``marin_alias`` at interpreter start once the
project is installed; :func:`alias_env` gives a subprocess the same through a ``sitecustomize``
(the shared test venv may predate the ``.pth`` file).

The textual mapping is textual and applied in this order (the order matters: ``fray.cluster`` and
``marin.resources`` are the package ``marin_resources`` here, and rule 3 must not see them):

1. ``fray.cluster`` -> ``marin_resources``
2. ``marin.resources`` -> ``marin_resources``
3. ``marin.`` -> ``marin_assets.``
4. ``experiments.`` -> ``marin_assets.experiments.``
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"

IMPORT_MAPPING: tuple[tuple[str, str], ...] = (
    (r"\bfray\.cluster\b", "marin_resources"),
    (r"\bmarin\.resources\b", "marin_resources"),
    (r"\bmarin\.", "marin_assets."),
    (r"\bexperiments\.", "marin_assets.experiments."),
)


def map_imports(source: str) -> str:
    """``source`` with Marin's module names replaced by this project's."""
    for pattern, replacement in IMPORT_MAPPING:
        source = re.sub(pattern, replacement, source)
    return source


SITECUSTOMIZE = "import marin_alias as _marin_alias\n_marin_alias.install()\n"


def alias_env(tmp: Path, extra_path: str | None = None, **env: str) -> dict[str, str]:
    """Environment for a subprocess whose interpreter resolves Marin's names as the installed
    ``marin_alias.pth`` makes it: a ``sitecustomize`` doing what the ``.pth`` line does."""
    site_dir = Path(tmp, "alias_site")
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    parts = [str(site_dir), *([extra_path] if extra_path else []), str(REPO)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(parts), "MARIN_RUN_OBSERVERS": "", **env}


def run_unmodified(
    script: Path, prefix: str, *args: str, cwd: str, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python <script> --prefix prefix args`` from ``cwd``, the script unchanged."""
    return subprocess.run(
        [sys.executable, str(script), "--prefix", prefix, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_marin_script(
    name: str, prefix: str, *args: str, cwd: str | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Map the imports of ``scripts/<name>.py``, run it with ``--prefix prefix`` and ``args``."""
    mapped = map_imports((SCRIPTS / f"{name}.py").read_text())
    target = Path(prefix).parent / f"{name}.py"
    target.write_text(mapped)
    run_env = {**os.environ, "PYTHONPATH": str(REPO), "MARIN_RUN_OBSERVERS": "", **(env or {})}
    return subprocess.run(
        [sys.executable, str(target), "--prefix", prefix, *args],
        cwd=cwd or str(Path(prefix).parent),
        env=run_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON summary line ``executor_main`` prints at the end of a run."""
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{") and '"run_id"' in line:
            return json.loads(line)
    raise AssertionError(f"no run summary in the output:\n{proc.stdout}\n{proc.stderr[-3000:]}")


def recorded_paths(prefix: str) -> dict[str, list[str]]:
    """Step name -> output paths (relative to ``prefix``) from the experiment records written there."""
    paths: dict[str, list[str]] = {}
    for record in sorted(Path(prefix, "experiments").glob("*.json")):
        for step in json.loads(record.read_text())["steps"]:
            rel = os.path.relpath(step["output_path"], prefix)
            paths.setdefault(step["name"], [])
            if rel not in paths[step["name"]]:
                paths[step["name"]].append(rel)
    return paths
