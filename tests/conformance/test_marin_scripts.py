"""Marin-style experiment scripts run here with only their imports changed (``marin_import``).

Each expected hash is computed by hand from Marin's rule -- the md5 of the version dict's JSON with
sorted keys, first 6 hex characters -- from the version dict written out next to it, and pinned.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conformance.marin_import import map_imports, recorded_paths, run_marin_script, summary
from tests.conftest import marin_hash


def status_of(prefix: str, rel: str) -> str | None:
    path = Path(prefix, rel, ".executor_status")
    return json.loads(path.read_text())["status"] if path.exists() else None


def test_import_mapping_order():
    source = "from marin.resources import CpuOnlyConfig\nfrom marin.execution.executor import versioned\n"
    source += "from experiments.defaults import default_train\n"
    assert map_imports(source) == (
        "from marin_resources import CpuOnlyConfig\nfrom marin_assets.execution.executor import versioned\n"
        "from marin_assets.experiments.defaults import default_train\n"
    )


HELLO_DATA = {"name": "hello_world/data", "config": {"random_seed": 0, "n": 100}, "dependencies": []}
HELLO_STATS = {
    "name": "hello_world/stats",
    "config": {"input_path": "DEP[0]/numbers.json"},
    "dependencies": [HELLO_DATA],
}


def test_hello_world_gives_marins_hashes_and_reruns_cached(prefix):
    assert (marin_hash(HELLO_DATA), marin_hash(HELLO_STATS)) == ("bd4f05", "8118f4")
    first = run_marin_script("hello_world", prefix)
    assert first.returncode == 0, first.stderr[-2000:]
    assert summary(first)["ran"] == 2
    assert recorded_paths(prefix) == {
        "hello_world/data": ["hello_world/data-bd4f05"],
        "hello_world/stats": ["hello_world/stats-8118f4"],
    }
    stats = json.loads(Path(prefix, "hello_world/stats-8118f4/stats.json").read_text())
    assert 0 <= stats["mean"] <= 100
    again = summary(run_marin_script("hello_world", prefix))
    assert (again["ran"], again["cached"]) == (0, 2)


def test_cli_parses_like_draccus(prefix):
    dry = run_marin_script("hello_world", prefix, "--dry_run", "true", "--force_run_failed", "true")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "dry run: 0 skip, 2 run" in dry.stdout
    assert not Path(prefix, "hello_world").exists()
    only = run_marin_script("hello_world", prefix, "--run_only", "[hello_world/data]")
    assert only.returncode == 0, only.stderr[-2000:]
    assert summary(only)["ran"] == 1  # "[...]" is a list of regexes, not a character class
    assert status_of(prefix, "hello_world/data-bd4f05") == "SUCCESS"
    assert status_of(prefix, "hello_world/stats-8118f4") is None
    unmatched = run_marin_script("hello_world", prefix, "--run_only", "[no_such_step]")
    assert unmatched.returncode == 0 and "did not match any step" in unmatched.stderr
    # Marin: a matched step that already succeeded does not pull in its dependencies.
    assert summary(run_marin_script("hello_world", prefix))["ran"] == 1
    Path(prefix, "hello_world/data-bd4f05/.executor_status").unlink()
    stats_only = run_marin_script("hello_world", prefix, "--run_only", "[hello_world/stats]")
    assert (summary(stats_only)["ran"], summary(stats_only)["cached"]) == (0, 1)
    assert status_of(prefix, "hello_world/data-bd4f05") is None


SWEEP_DATA = {"name": "sweep/data", "config": {"size": 10}, "dependencies": []}
SWEEP_RUNS = {
    (lr, bs): {
        "name": "sweep/train",
        "config": {"data_path": "DEP[0]", "learning_rate": lr, "batch_size": bs},
        "dependencies": [SWEEP_DATA],
    }
    for lr in (1e-3, 3e-3)
    for bs in (8, 16)
}
# The summary references the four runs: DEP[0..3] under the list keys "runs.[i]".
SWEEP_SUMMARY = {
    "name": "sweep/summary",
    "config": {f"runs.[{i}]": f"DEP[{i}]" for i in range(4)},
    "dependencies": list(SWEEP_RUNS.values()),
}


def test_sweep_2x2_one_name_four_versions(prefix):
    hashes = [marin_hash(v) for v in SWEEP_RUNS.values()]
    assert hashes == ["ab0bb1", "df4df3", "e32353", "ba51d0"]
    assert (marin_hash(SWEEP_DATA), marin_hash(SWEEP_SUMMARY)) == ("b83146", "704ae7")
    proc = run_marin_script("sweep", prefix)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert summary(proc)["ran"] == 6
    paths = recorded_paths(prefix)
    assert sorted(paths["sweep/train"]) == sorted(f"sweep/train-{h}" for h in hashes)
    assert paths["sweep/summary"] == ["sweep/summary-704ae7"]
    assert len(json.loads(Path(prefix, "sweep/summary-704ae7/summary.json").read_text())) == 4
    again = summary(run_marin_script("sweep", prefix))
    assert (again["ran"], again["cached"]) == (0, 6)


MIX_WEB = {"name": "mixture/web", "config": {"text": "web text"}, "dependencies": []}
MIX_CODE = {"name": "mixture/code", "config": {"text": "def f(): pass"}, "dependencies": []}
# web is referenced twice (a component and a validation set): two DEP indices, listed twice.
# A versioned dataclass enters as its repr (Marin's encoder falls back to str()); a hardcoded path
# outside the prefix enters as written; the versioned dict of weights as a JSON object.
MIX = {
    "name": "mixture/mix",
    "config": {
        "components.web": "DEP[0]/docs.jsonl",
        "components.code": "DEP[1]",
        "weights": {"web": 0.7, "code": 0.3},
        "shape": "Shape(layers=2, width=32)",
        "validation.[0]": "DEP[2]",
        "validation.[1]": "gs://marin-public/validation/fixed",
    },
    "dependencies": [MIX_WEB, MIX_CODE, MIX_WEB],
}


def test_mixture_and_an_input_name_in_the_steps_list(prefix):
    assert (marin_hash(MIX_WEB), marin_hash(MIX_CODE), marin_hash(MIX)) == ("8418a1", "d693e4", "7ead0d")
    proc = run_marin_script("mixture", prefix)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert recorded_paths(prefix)["mixture/mix"] == ["mixture/mix-7ead0d"]
    assert json.loads(Path(prefix, "mixture/mix-7ead0d/mixture.json").read_text()) == {"web": 0.7, "code": 0.3}
    again = summary(run_marin_script("mixture", prefix))
    assert (again["ran"], again["cached"]) == (0, 3)


NB_TRAIN = {"name": "nonblocking/train", "config": {"steps": 1000}, "dependencies": []}
NB_PEEK = {
    "name": "nonblocking/peek",
    "config": {"checkpoint": "DEP[0]/checkpoints/step-100"},
    "dependencies": [],
    "pseudo_dependencies": [NB_TRAIN],
}


def test_a_non_blocking_dependency_is_versioned_but_not_run(prefix):
    assert marin_hash(NB_PEEK) == "411e1b"
    proc = run_marin_script("nonblocking", prefix)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert summary(proc)["ran"] == 1
    assert not Path(prefix, f"nonblocking/train-{marin_hash(NB_TRAIN)}").exists()
    peek = json.loads(Path(prefix, "nonblocking/peek-411e1b/peek.json").read_text())
    assert peek["checkpoint"].endswith(f"nonblocking/train-{marin_hash(NB_TRAIN)}/checkpoints/step-100")
    again = summary(run_marin_script("nonblocking", prefix))
    assert (again["ran"], again["cached"]) == (0, 1)


FAIL_BASE = {"name": "failing/base", "config": {"label": "base"}, "dependencies": []}
FAIL_FLAKY = {"name": "failing/flaky", "config": {"label": "flaky", "upstream": "DEP[0]"}, "dependencies": [FAIL_BASE]}
FAIL_AFTER = {
    "name": "failing/after_flaky",
    "config": {"label": "after", "upstream": "DEP[0]"},
    "dependencies": [FAIL_FLAKY],
}


def test_failing_step_marks_dependents_and_never_overwrites_success(prefix):
    flaky, after = f"failing/flaky-{marin_hash(FAIL_FLAKY)}", f"failing/after_flaky-{marin_hash(FAIL_AFTER)}"
    assert (flaky, after) == ("failing/flaky-3ea57c", "failing/after_flaky-ec28ea")
    first = run_marin_script("failing", prefix)
    assert first.returncode == 1
    assert status_of(prefix, flaky) == "FAILED"
    assert status_of(prefix, after) == "DEP_FAILED"
    assert status_of(prefix, "failing/independent-18d964") == "SUCCESS"
    refused = run_marin_script("failing", prefix, "--force_run_failed", "false")
    assert refused.returncode == 1 and "FAILED" in refused.stderr
    # force_run_failed defaults to true, as in Marin: the fixed step is re-run.
    fixed = run_marin_script("failing", prefix, env={"CONFORMANCE_FIX": "1"})
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert status_of(prefix, after) == "SUCCESS"
    again = summary(run_marin_script("failing", prefix, env={"CONFORMANCE_FIX": "1"}))
    assert (again["ran"], again["cached"]) == (0, 4)
    # The flaky step loses its status and fails again: its dependent's intact SUCCESS stays.
    Path(prefix, flaky, ".executor_status").unlink()
    assert run_marin_script("failing", prefix).returncode == 1
    assert status_of(prefix, after) == "SUCCESS"
