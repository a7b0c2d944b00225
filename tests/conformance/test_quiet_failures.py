"""A failed command-line run says why in a few lines, the full trace in the run's log file; the
"not listed in [tool.marin]" warning comes once per run and says how to list the script. Both with a
real Dagster instance recording the run (the source of the old ~80 lines of tracebacks)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conformance.marin_import import SCRIPTS, alias_env, run_unmodified
from tests.conformance.test_team_repo import hf_hub, team  # noqa: F401 - fixtures


def test_a_failed_run_prints_the_cause_first_and_the_trace_goes_to_the_log(
    team,  # noqa: F811
    hf_hub,  # noqa: F811
    tmp_path,
    prefix,
    dagster_home,
):
    env = alias_env(tmp_path, HF_HUB_CACHE=hf_hub, HF_HUB_OFFLINE="1", DAGSTER_HOME=dagster_home)
    env.pop("MARIN_RUN_OBSERVERS")  # the default observer: record the run in the Dagster instance
    proc = run_unmodified(team / "experiments" / "exp3_missing.py", prefix, cwd=str(team), env=env)
    assert proc.returncode == 1
    console = (proc.stdout + proc.stderr).splitlines()
    assert len(console) <= 10, "\n".join(console)
    assert not [line for line in console if "Traceback" in line or "Stack Trace" in line or "alembic" in line]
    failed = next(i for i, line in enumerate(console) if "FAILED after" in line)
    assert "big-org/big-web" in console[failed] and "not in the local Hugging Face cache" in console[failed]
    assert "recorded in Dagster instance" in proc.stderr  # the recording happened, quietly
    assert "  - raw/big-web (" in proc.stderr
    log_line = console[-1]
    match = re.search(r"full tracebacks and the run's log: (\S+\.log)$", log_line)
    assert match, log_line
    log = Path(match.group(1))
    assert log.parent == Path(prefix, "experiments", "logs")
    text = log.read_text()
    assert "=== raw/big-web (" in text and "Traceback (most recent call last)" in text
    assert "HfDatasetNotCachedError" in text
    assert "dagster - ERROR" in text  # Dagster's own report of the recording, kept in the file


def test_a_script_outside_the_project_prints_no_line_about_the_projects_pyproject(tmp_path, prefix, dagster_home):
    """A team's script (outside this project) is recorded without a console line telling the user to list
    it in the project's pyproject, which is not the team's to edit (issue 38); the debug log still says how."""
    script = tmp_path / "hello_world.py"
    script.write_text((SCRIPTS / "hello_world.py").read_text())
    env = alias_env(tmp_path, DAGSTER_HOME=dagster_home)
    env.pop("MARIN_RUN_OBSERVERS")
    proc = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recorded in Dagster instance" in proc.stderr
    assert "[tool.marin]" not in proc.stderr and "MARIN_EXPERIMENTS" not in proc.stderr
    assert "Welcome to Dagster" not in proc.stderr and "alembic" not in proc.stderr
