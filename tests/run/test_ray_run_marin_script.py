"""``ray_run`` submits a Marin script as written (``marin.*``, ``fray.cluster``, the team's
``experiments`` package) from a team repository, on a real two-node Ray cluster.

The job's interpreter resolves Marin's names as an installed project's ``marin_alias.pth`` makes
it; here the shared test venv may predate that file, so a ``sitecustomize`` does the same through
``PYTHONPATH`` (for ``ray_run``'s own inspection of the script and, with ``-e``, for the job).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.marin_import import alias_env
from tests.conformance.test_team_repo import TEAM_REPO

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.mark.timeout(600)
def test_a_marin_script_of_a_team_repository_runs_as_a_job(ray_cluster, tmp_path):
    team = tmp_path / "team"
    shutil.copytree(TEAM_REPO, team, ignore=shutil.ignore_patterns("__pycache__"))
    prefix = tmp_path / "prefix"
    env = {**ray_cluster.env, "PYTHONPATH": alias_env(tmp_path)["PYTHONPATH"]}
    command = ["python", "experiments/exp1_hello.py", "--prefix", str(prefix), "--no_record"]
    result = subprocess.run(
        [sys.executable, "-m", "marin_assets.run.ray_run", "--address", ray_cluster.dashboard_url]
        + ["--working_dir", str(team), "-e", "PYTHONPATH", env["PYTHONPATH"], "--", *command],
        cwd=team,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["status"] == "SUCCEEDED"
    written = json.loads(Path(prefix, "team/hello-8680d6/hello.json").read_text())
    assert written == {"greeting": "hi", "defaults": "the team's experiments.defaults"}
    assert os.path.exists(Path(prefix, "team/hello-8680d6/.executor_status"))
