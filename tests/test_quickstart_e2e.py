"""The README's main command at test size: sample drops -> curated docs -> model -> eval, recorded in Dagster.

Run as a new user runs it (``bash scripts/quickstart.sh``), output included: one line per unit, then
executor_main's JSON line, then the human summary as the last thing printed; no Dagster, Ray, JAX or
lm-eval log lines; the embedded Ray head stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import dagster as dg
import psutil
import pytest

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.execution import StepGraph
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.experiments import curation, quickstart
from marin_assets.training.training_log import list_step_dirs
from tests.published_files import files_naming_a_staging_folder

REPO = Path(__file__).resolve().parents[1]
DROPS = ["drop-001", "drop-002"]
PROGRESS = re.compile(r"^\[\s*\d+s\] done   \S+ \([\d.]+s\)$")
# What a log record of Dagster, Ray, JAX, Levanter or lm-eval looks like in a terminal.
LOG_RECORD = re.compile(r"\b(DEBUG|INFO|WARNING)\b|worker\.py|Ray cluster|jax|levanter|lm_eval", re.IGNORECASE)


def ray_processes(temp_dir: str) -> list[psutil.Process]:
    """Processes whose command line names this Ray temp dir (the embedded head's daemons)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(temp_dir in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def run_readme_command(prefix: str, dagster_home: str, ray_tmp: str) -> tuple[dict, list[str]]:
    """``bash scripts/quickstart.sh`` at test size; returns executor_main's JSON and the output lines."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MARIN_PREFIX": prefix,
        "DAGSTER_HOME": dagster_home,
        "MARIN_RAY_TMPDIR": ray_tmp,
        # The code location then defines the test-size quickstart, so the run records on its assets
        # (the README's tiny run needs nothing: the location's default size is tiny).
        "MARIN_QUICKSTART_SIZE": "test",
    }
    env.pop("MARIN_KEEP_RAY", None)
    cmd = ["bash", "scripts/quickstart.sh", "--size", "test", "--sample_docs", "120", "--sample_drops", "2"]
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    lines = proc.stdout.splitlines()
    report = json.loads(next(line for line in reversed(lines) if line.startswith('{"run_id"')))
    return report, lines


def check_output(lines: list[str], units: int, dagster_home: str) -> None:
    """One progress line per computed unit, the JSON line, then the summary to the end; no log records."""
    json_at = next(i for i, line in enumerate(lines) if line.startswith('{"run_id"'))
    progress_from = next((i for i, line in enumerate(lines) if PROGRESS.match(line)), json_at)
    # Nothing before the first unit: no log record of Dagster, Ray or the engine.
    assert not [line for line in lines[:progress_from] if LOG_RECORD.search(line)], lines[:progress_from]
    progress = lines[progress_from:json_at]
    assert all(PROGRESS.match(line) for line in progress), progress
    assert len(progress) == units
    summary = lines[json_at + 1 :]
    text = "\n".join(summary)
    assert summary[0] == "" and summary[1].startswith("Quickstart finished in "), summary[:3]
    if units:
        assert re.search(r"^  ran: curation 12 \(2 drops\), .*checkpoints 1, evaluation 1$", text, re.M), text
    else:
        assert "  ran: nothing (every unit was cached)" in summary, summary
    for expected in ("  train: loss ", "  bits per byte: heldout ", "  lm-eval:", "| marin_docstring_mc | acc |"):
        assert expected in text, expected
    # The summary is the end of the output: its last line says where the UI is.
    assert summary[-1].startswith(f"  UI: DAGSTER_HOME={dagster_home} ") and "dagster dev" in summary[-1]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_quickstart_end_to_end_then_fully_cached(prefix, dagster_home):
    # The install check first, so that a pending (re)install's output is not part of what is checked.
    subprocess.run(["bash", "scripts/setup_env.sh"], cwd=REPO, check=True, capture_output=True, timeout=900)
    ray_tmp = tempfile.mkdtemp(prefix="mrq-", dir="/tmp")
    try:
        first, first_lines = run_readme_command(prefix, dagster_home, ray_tmp)
        # The README command stops the embedded Ray head it used.
        assert ray_processes(ray_tmp) == []
        second, second_lines = run_readme_command(prefix, dagster_home, ray_tmp)
    finally:
        from marin_resources.ray_head import stop_embedded_head

        stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    steps = quickstart.build_steps("test")
    graph = StepGraph([steps["evaluation"]], prefix, {curation.PARTITION_SET: DROPS})
    units = [(n, p) for n in graph.topological() for p in (DROPS if n.partitioned_by else [None])]
    assert first["ran"] == len(units)
    check_output(first_lines, len(units), dagster_home)
    for node, partition in units:
        assert read_status(node.partition_output_path(partition)).status == "SUCCESS", node.name

    train = read_metadata(graph.resolved(steps["train"]).output_path)
    assert train["final_loss"] < train["initial_loss"] - 0.5
    evaluation_dir = Path(graph.resolved(steps["evaluation"]).output_path)
    results = json.loads(next(evaluation_dir.rglob("results.json")).read_text())
    for task in ("marin_docstring_mc", "marin_docstring_cloze", "marin_docstring_ppl", "levanter_validation/heldout"):
        assert task in results["results"], task
    # The tokenizer reads the reference drop only; every drop has its own cache.
    tokenizer = graph.resolved(steps["tokenizer"])
    assert tokenizer.version["config"]["input_paths.[0]"].startswith("DEP[0]@drop-001/")
    for drop in DROPS:
        cache = read_metadata(graph.resolved(steps["tokenized"]).partition_output_path(drop))
        assert cache["tokens"] > 0

    # The run is in the Dagster instance: every asset has a materialization.
    instance = dg.DagsterInstance.get()
    for node in graph.topological():
        assert instance.get_latest_materialization_event(asset_key_for(node.name)) is not None, node.name
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"marin/run_id": first["run_id"]}))
    # One Dagster run per executor_main invocation, every drop's units in it.
    assert len(runs) == 1 and runs[0].status == dg.DagsterRunStatus.SUCCESS, runs

    # No published file names a staging folder (summaries, stats, Levanter's configs, eval results...).
    assert files_naming_a_staging_folder(prefix) == []
    train_out = graph.resolved(steps["train"]).output_path
    assert f"base_path: {train_out}/checkpoints" in Path(train_out, "train_config.yaml").read_text()

    assert second["ran"] == 0 and second["cached"] == len(units)
    check_output(second_lines, 0, dagster_home)

    # Levanter resumes from the published train_config.yaml: it loads the published checkpoint.
    last = list_step_dirs(f"{train_out}/checkpoints")[-1][0]
    resumed = subprocess.run(
        [sys.executable, "-m", "levanter.main.train_lm", "--config_path", f"{train_out}/train_config.yaml",
         "--trainer.num_train_steps", str(last + 2)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu", "WANDB_MODE": "disabled"},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Loading checkpoint from {train_out}/checkpoints/step-{last}\n" in resumed.stdout + resumed.stderr
    # Adding nothing changed no path: the curation steps of the quickstart are the curation experiment's.
    assert graph.resolved(steps["consolidated"]) is graph.resolved(curation.STEPS["consolidated"])
