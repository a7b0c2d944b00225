"""A team repository laid out like Marin's (``marin_repo/``: ``experiments/`` with ``defaults.py``, a
dataset registry and ``exp*.py`` scripts, Marin's imports) works with this library unmodified: from
the command line and as the code location. The team's modules win; what it lacks falls back to the
built-ins, which keep their own names."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.marin_import import alias_env, recorded_paths, run_unmodified, summary
from tests.conftest import marin_hash

TEAM_REPO = Path(__file__).resolve().parent / "marin_repo"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


HELLO = {"name": "team/hello", "config": {"greeting": "hi"}, "dependencies": []}
TINY_WEB = {"name": "raw/tiny-web", "config": {}, "dependencies": []}  # Marin's default_download versions nothing
LINES = {"name": "team/tiny_web_lines", "config": {"input_path": "DEP[0]"}, "dependencies": [TINY_WEB]}


@pytest.fixture
def team(tmp_path) -> Path:
    repo = tmp_path / "team"
    shutil.copytree(TEAM_REPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    return repo


@pytest.fixture
def hf_hub(tmp_path) -> str:
    """A local Hugging Face hub cache holding ``tiny-org/tiny-web`` (and nothing else)."""
    cache = tmp_path / "hub"
    repo = cache / "datasets--tiny-org--tiny-web"
    data = "".join(json.dumps({"id": f"tw-{i}", "text": f"page {i}"}) + "\n" for i in range(5)).encode()
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    link = repo / "snapshots" / COMMIT / "data" / "train.jsonl"
    link.parent.mkdir(parents=True)
    os.symlink(os.path.relpath(blob, link.parent), link)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return str(cache)


def test_scripts_run_unmodified_with_the_teams_modules(team, hf_hub, tmp_path, prefix):
    assert (marin_hash(HELLO), marin_hash(TINY_WEB), marin_hash(LINES)) == ("8680d6", "5a2e9a", "0ce5a3")
    env = alias_env(tmp_path, HF_HUB_CACHE=hf_hub, HF_HUB_OFFLINE="1")
    # From the repository root, as Marin's docs run them.
    hello = run_unmodified(team / "experiments" / "exp1_hello.py", prefix, cwd=str(team), env=env)
    assert hello.returncode == 0, hello.stderr[-3000:]
    written = json.loads(Path(prefix, "team/hello-8680d6/hello.json").read_text())
    assert written == {"greeting": "hi", "defaults": "the team's experiments.defaults"}
    # From inside experiments/: the package is found above the script.
    count = run_unmodified(team / "experiments" / "exp2_count.py", prefix, cwd=str(team / "experiments"), env=env)
    assert count.returncode == 0, count.stderr[-3000:]
    assert summary(count)["ran"] == 2
    assert recorded_paths(prefix) == {
        "team/hello": ["team/hello-8680d6"],
        "raw/tiny-web": ["raw/tiny-web-5a2e9a"],
        "team/tiny_web_lines": ["team/tiny_web_lines-0ce5a3"],
    }
    counted = json.loads(Path(prefix, "team/tiny_web_lines-0ce5a3/count.json").read_text())
    assert counted == {"lines": 5, "by": "the team's experiments.defaults"}


def test_a_registry_dataset_that_is_not_local_fails_at_run_time_naming_it(team, hf_hub, tmp_path, prefix):
    env = alias_env(tmp_path, HF_HUB_CACHE=hf_hub, HF_HUB_OFFLINE="1")
    proc = run_unmodified(team / "experiments" / "exp3_missing.py", prefix, cwd=str(team), env=env)
    assert proc.returncode == 1
    assert "big-org/big-web" in proc.stderr and "is not in the local Hugging Face cache" in proc.stderr
    (status,) = Path(prefix, "raw").glob("big-web-*/.executor_status")
    assert json.loads(status.read_text())["status"] == "FAILED"


MODULES = """
import json, sys
import experiments, experiments.defaults, experiments.pretraining_datasets, experiments.simple_train_config
import marin_assets.experiments.defaults as builtin_defaults
print(json.dumps({
    "package": experiments.__file__,
    "defaults": experiments.defaults.__file__,
    "team_wins": experiments.defaults is not builtin_defaults,
    "builtin_name": builtin_defaults.__name__,
    "fallback": experiments.simple_train_config.__name__,
    "registry": sorted(experiments.pretraining_datasets.DATASETS),
}))
"""


def test_team_modules_win_and_builtins_fill_in_under_their_own_name(team, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", MODULES], cwd=team, env=alias_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert found["package"] == str(team / "experiments" / "__init__.py")
    assert found["defaults"] == str(team / "experiments" / "defaults.py")
    assert found["team_wins"] and found["builtin_name"] == "marin_assets.experiments.defaults"
    assert found["fallback"] == "marin_assets.experiments.simple_train_config"  # the team keeps none
    assert found["registry"] == ["big_web", "tiny_web"]  # defined at import; no data needed


LOCATION = """
import json
from marin_assets.definitions import build_definitions
defs = build_definitions()
graph = defs.resolve_asset_graph()
keys = sorted(key.to_user_string() for key in graph.get_all_asset_keys())
import experiments.defaults
print(json.dumps({"keys": keys, "defaults": experiments.defaults.__file__}))
"""


def test_the_code_location_loads_the_teams_scripts(team, tmp_path):
    env = alias_env(tmp_path, MARIN_PROJECT_ROOT=str(team), MARIN_PREFIX=str(tmp_path / "prefix"))
    env.pop("MARIN_EXPERIMENTS", None)
    proc = subprocess.run(
        [sys.executable, "-c", LOCATION], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    assert found["defaults"] == str(team / "experiments" / "defaults.py")
    assert not [k for k in found["keys"] if k.startswith("experiment_errors")], found["keys"]
    for key in ("team/hello", "raw/tiny_web", "team/tiny_web_lines", "raw/big_web", "team/big_web_lines"):
        assert key in found["keys"], (key, found["keys"])
