"""A cached re-run of Marin's CPU tutorial script (``tests/conformance/scripts/tiny_model.py``),
against the import of Levanter that the script itself makes.

``python -m bench.cached_rerun [ROUNDS]`` (default 3) writes the tutorial's inputs and the script
(its imports mapped as the conformance tests map them) under a temp dir, marks both of its steps
SUCCESS at their hashed output paths (the state a first run leaves; no training here), then, in
turns so that load affects both alike:

* baseline: ``python -c "import levanter.data.text, levanter.models.llama"`` (what the script
  imports from Levanter: ``TextLmDatasetFormat`` and, through ``experiments.llama``, ``LlamaConfig``);
* the script run as a user runs it (``python tiny_model.py --prefix P``), all cached, with the
  Dagster recorder off (``MARIN_RUN_OBSERVERS=""``, as ``run_marin_script`` runs it) and on with
  ``DAGSTER_HOME`` unset (the default plugin, which then records nothing).

Prints one JSON line: the median seconds of each, the script/baseline ratios, and the load average.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def prepare(root: Path) -> Path:
    """Inputs, the mapped script and the cached state; returns the script's path."""
    from marin_assets.execution import StepGraph
    from marin_assets.execution.status import write_status
    from tests.conformance.marin_import import SCRIPTS, map_imports
    from tests.conformance.test_tiny_model import write_inputs

    write_inputs(root)
    script = root / "tiny_model.py"
    script.write_text(map_imports((SCRIPTS / "tiny_model.py").read_text()))
    cwd = os.getcwd()
    os.chdir(root)  # the script names its inputs relative to the working directory
    try:
        steps = runpy.run_path(str(script), run_name="bench")
    finally:
        os.chdir(cwd)
    graph = StepGraph([steps["nano_model"]], str(root / "prefix"))
    for step in (steps["tiny_tokenized"], steps["nano_model"]):
        write_status(graph.resolved(step).output_path, "SUCCESS")
    return script


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    if argv[1].endswith(".py") and '"cached": 2' not in done.stdout:
        raise SystemExit(f"the re-run was not fully cached:\n{done.stdout[-3000:]}")
    return seconds


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    root = Path(tempfile.mkdtemp(prefix="marin-cached-rerun-"))
    try:
        script = prepare(root)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("DAGSTER_HOME", None)
        quiet = {**env, "MARIN_RUN_OBSERVERS": ""}
        default = {k: v for k, v in env.items() if k != "MARIN_RUN_OBSERVERS"}
        run = [sys.executable, str(script), "--prefix", str(root / "prefix")]
        baseline = [sys.executable, "-c", "import levanter.data.text, levanter.models.llama"]
        times: dict[str, list[float]] = {"levanter_import": [], "rerun_no_recorder": [], "rerun_default": []}
        for _ in range(rounds):
            times["levanter_import"].append(timed(baseline, root, env))
            times["rerun_no_recorder"].append(timed(run, root, quiet))
            times["rerun_default"].append(timed(run, root, default))
        med = {name: statistics.median(values) for name, values in times.items()}
        print(
            json.dumps(
                {
                    **{f"{name}_s": round(value, 2) for name, value in med.items()},
                    "ratio_no_recorder": round(med["rerun_no_recorder"] / med["levanter_import"], 3),
                    "ratio_default": round(med["rerun_default"] / med["levanter_import"], 3),
                    "rounds": rounds,
                    "loadavg": [round(x, 2) for x in os.getloadavg()],
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
