"""Marin-style scripts of the stages issue 38 added, unmodified, as a team runs them (slow: each is a
fresh interpreter): the datashop tutorial and the forward-logits tutorial dry-run and fail when run, one
line naming what is missing (DCLM data, the hub model); the overlap script runs on local files and re-runs
cached."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.conformance.marin_import import SCRIPTS, alias_env, run_unmodified, summary


def _plan(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("run", "skip", "wait", "fail"):
            out[parts[1]] = parts[2]
    return out


def _copy(name: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(SCRIPTS / f"{name}.py", folder / f"{name}.py"))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_datashop_tutorial_dry_runs_and_its_missing_data_fails_in_one_line(tmp_path, prefix):
    script = _copy("datashop_tutorial", tmp_path / "team")
    env = alias_env(tmp_path)
    dry = run_unmodified(script, prefix, "--dry_run", "true", cwd=str(script.parent), env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    plan = _plan(dry.stdout)
    assert plan["documents/datashop-labels/datashop-tutorial"].endswith("/documents/datashop-labels/datashop-tutorial")
    assert "classifiers/datashop-fasttext/datashop-tutorial" in plan
    assert "documents/datashop-datasets/datashop-dclm-tutorial-subset" in plan

    run = run_unmodified(script, prefix, cwd=str(script.parent), env=env)
    assert run.returncode == 1
    failed = [line for line in run.stderr.splitlines() if "FAILED" in line]
    assert failed and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "jsonl.zst" in failed[0] or "dclm" in failed[0].lower()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_forward_logits_tutorial_fails_naming_the_model_it_cannot_load(tmp_path, prefix):
    script = _copy("forward_logits", tmp_path / "team")
    (script.parent / "books").mkdir()
    (script.parent / "books" / "gatsby.txt").write_text("In my younger and more vulnerable years " * 40)
    env = alias_env(tmp_path, HF_HUB_OFFLINE="1")
    dry = run_unmodified(script, prefix, "--dry_run", "true", cwd=str(script.parent), env=env)
    assert dry.returncode == 0 and "tutorials/forward-logits" in _plan(dry.stdout), dry.stderr[-3000:]
    run = run_unmodified(script, prefix, cwd=str(script.parent), env=env)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    failed = [line for line in run.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "meta-llama/Meta-Llama-3.1-8B" in failed[0], run.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_overlap_names_run_on_local_files_and_rerun_cached(tmp_path, prefix):
    team = tmp_path / "team"
    script = _copy("overlap_stages", team)
    shared = "the quick brown fox jumps over the lazy dog near the river bank"
    for folder, rows in (
        ("train", [{"id": "t1", "text": f"{shared}\nunrelated line here\n{shared}"}, {"id": "t2", "text": "nothing"}]),
        ("eval", [{"id": "e1", "text": f"question: {shared}"}, {"id": "e2", "text": "a fresh question entirely"}]),
    ):
        (team / folder).mkdir()
        with gzip.open(team / folder / "part.jsonl.gz", "wt") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    scenario = {"scenario_key": {"name": "toy"}, "instances": [
        {"id": "i1", "input": f"Q: {shared}?", "references": ["yes"]},
        {"id": "i2", "input": "Q: unrelated?", "references": [shared]},
    ]}  # fmt: skip
    (team / "scenarios.jsonl").write_text(json.dumps(scenario) + "\n")
    env = alias_env(tmp_path)
    run = run_unmodified(script, prefix, cwd=str(team), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert summary(run)["ran"] == 3
    out = {p.name.rsplit("-", 1)[0]: p for p in Path(prefix, "train_test_overlap").iterdir()}
    with gzip.open(out["decon-eval"] / "5" / "part.jsonl.gz", "rt") as handle:
        marks = {r["id"]: r["attributes"]["overlap_5"] for r in map(json.loads, handle)}
    assert marks["e1"] and not marks["e2"]
    (stats,) = [json.loads(line) for line in (out["helm-style"] / "stats" / "5.jsonl").read_text().splitlines()]
    assert stats["instance_ids_with_overlapping_input"] == ["i1"]
    assert stats["instance_ids_with_overlapping_reference"] == ["i2"]
    (paragraphs,) = Path(prefix, "attributes").iterdir()
    with gzip.open(paragraphs / "data" / "part.jsonl.gz", "rt") as handle:
        spans = {r["id"]: r["attributes"]["duplicate_text"] for r in map(json.loads, handle)}
    first = len(shared) + 1 + len("unrelated line here") + 1  # t1's second copy of the shared line
    assert spans == {"t1": [[first, first + len(shared), 1.0]], "t2": []}
    again = run_unmodified(script, prefix, cwd=str(team), env=env)
    assert again.returncode == 0 and summary(again)["cached"] == 3
