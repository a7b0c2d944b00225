"""``marin run -v SCRIPT``: other libraries' INFO lines (alembic, SQLAlchemy, Dagster) reach the console
only when asked for; without ``-v`` they go to the run's log file only (issue 31, item 4)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marin_assets.cli.main import main as marin_main
from marin_assets.execution.run_log import VERBOSE_ENV, ConsoleFilter

MARIN = Path(sys.executable).parent / "marin"

PROBE = textwrap.dedent(
    """
    import json, sys
    from marin_assets.execution.run_log import verbose_requested
    with open(sys.argv[1], "w") as out:
        json.dump({"verbose": verbose_requested(), "argv": sys.argv[1:]}, out)
    """
)

ONE_STEP = textwrap.dedent(
    """
    from dataclasses import dataclass

    from marin.execution.executor import ExecutorStep, executor_main, this_output_path, versioned
    from marin_assets.execution.storage import atomic_write_text


    @dataclass(frozen=True)
    class Cfg:
        output_path: str
        value: int


    def write(config: Cfg) -> None:
        atomic_write_text(f"{config.output_path}/value.txt", str(config.value))


    if __name__ == "__main__":
        executor_main(steps=[ExecutorStep(name="verbose/one", fn=write, config=Cfg(this_output_path(), versioned(1)))])
    """
)


def test_dash_v_before_the_script_sets_what_verbose_requested_reads(tmp_path, monkeypatch):
    # setenv first: monkeypatch then removes what `marin run -v` sets in this process when the test
    # ends (a delenv of an unset variable records nothing, and the next tests would run verbose).
    monkeypatch.setenv(VERBOSE_ENV, "0")
    monkeypatch.delenv(VERBOSE_ENV)
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    seen = tmp_path / "seen.json"
    assert marin_main(["run", str(script), str(seen)]) == 0
    assert json.loads(seen.read_text())["verbose"] is False
    for flag in ("-v", "--verbose"):
        monkeypatch.delenv(VERBOSE_ENV, raising=False)
        assert marin_main(["run", flag, str(script), str(seen)]) == 0
        assert json.loads(seen.read_text()) == {"verbose": True, "argv": [str(seen)]}  # not passed on
    # After the script, -v is the script's own argument, not marin run's.
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    assert marin_main(["run", str(script), str(seen), "-v"]) == 0
    assert json.loads(seen.read_text()) == {"verbose": False, "argv": [str(seen), "-v"]}


def test_run_help_documents_dash_v(capsys):
    assert marin_main(["run", "--help"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: marin run [-v] SCRIPT")
    assert "-v, --verbose" in shown and "MARIN_VERBOSE" in shown


def test_console_filter_lets_third_party_info_through_only_when_verbose(monkeypatch):
    alembic = logging.makeLogRecord({"name": "alembic.runtime.migration", "levelno": logging.INFO, "msg": "x"})
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    assert not ConsoleFilter().filter(alembic)
    monkeypatch.setenv(VERBOSE_ENV, "1")
    loud = ConsoleFilter()
    loud.quiet = True  # also while the run is recorded in Dagster
    assert loud.filter(alembic)


@pytest.mark.slow  # two runs recorded in fresh Dagster instances: ~10-20 s
def test_marin_run_records_quietly_and_dash_v_shows_alembic(tmp_path, session_ray_tmpdir):
    """End to end through the installed command: a fresh Dagster instance migrates its database
    (alembic INFO lines) while the run is recorded; only ``-v`` puts them on the console."""
    script = tmp_path / "one_step.py"
    script.write_text(ONE_STEP)
    consoles = {}
    for mode, flags in (("quiet", []), ("verbose", ["-v"])):
        home = tmp_path / f"dagster-{mode}"
        home.mkdir()
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        env = {k: v for k, v in os.environ.items() if k not in ("MARIN_PREFIX", "RAY_ADDRESS", VERBOSE_ENV)}
        env.pop("MARIN_RUN_OBSERVERS", None)  # the default observer: record the run in the Dagster instance
        env.update(DAGSTER_HOME=str(home), MARIN_RAY_TMPDIR=session_ray_tmpdir)
        done = subprocess.run(
            [str(MARIN), "run", *flags, str(script), "--prefix", str(tmp_path / mode)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        consoles[mode] = done.stdout + done.stderr
    assert "recorded in Dagster instance" in consoles["quiet"], consoles["quiet"]
    assert "alembic" not in consoles["quiet"].lower(), consoles["quiet"]
    assert "alembic" in consoles["verbose"].lower(), consoles["verbose"]
