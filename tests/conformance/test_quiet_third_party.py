"""A script that configures logging itself (``logging.basicConfig(level=logging.INFO)``, as many of
Marin's do) gets no alembic / SQLAlchemy lines on its console from recording the run in the Dagster
instance, unless ``-v`` (``$MARIN_VERBOSE``) asks for them; and a script kept outside the project gets no
line about the project's pyproject (issue 38: not the team's to edit)."""

from __future__ import annotations

from tests.conformance.marin_import import SCRIPTS, alias_env, run_unmodified


def _script(tmp_path):
    script = tmp_path / "hello_logging.py"
    source = (SCRIPTS / "hello_world.py").read_text()
    script.write_text("import logging\n\nlogging.basicConfig(level=logging.INFO)\n" + source)
    return script


def test_third_party_info_lines_stay_off_a_configured_console(tmp_path, prefix, dagster_home):
    script = _script(tmp_path)
    env = alias_env(tmp_path, DAGSTER_HOME=dagster_home)
    env.pop("MARIN_RUN_OBSERVERS")  # the default observer: record the run in the Dagster instance
    env.pop("MARIN_VERBOSE", None)
    quiet = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    console = quiet.stdout + quiet.stderr
    assert "recorded in Dagster instance" in console  # the recording happened
    assert "alembic" not in console.lower() and "sqlalchemy" not in console.lower()
    assert "move it into the project" not in console
    assert "not listed in [tool.marin]" not in console

    verbose = run_unmodified(script, f"{prefix}-v", cwd=str(tmp_path), env={**env, "MARIN_VERBOSE": "1"})
    assert verbose.returncode == 0, verbose.stderr[-3000:]
    assert "alembic" in (verbose.stdout + verbose.stderr).lower()
