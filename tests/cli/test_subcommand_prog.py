"""Each subcommand's usage and errors name the program the user typed: ``marin gc`` under the marin
command, ``python -m marin_assets.execution.gc`` when started by module path (both keep working)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from marin_assets.cli.main import main as marin_main

MODULES = {
    "gc": "marin_assets.execution.gc",
    "invalidate": "marin_assets.execution.invalidate",
    "manifest": "marin_assets.landing.zone",
    "browse": "marin_assets.browse",
    "sample-drop": "marin_assets.experiments.sample_data",
    "ray-run": "marin_assets.run.ray_run",
}


@pytest.mark.parametrize("command", sorted(MODULES))
def test_marin_subcommand_help_names_marin_and_python_m_names_the_module(command, capsys):
    with pytest.raises(SystemExit) as done:
        marin_main([command, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: marin {command} "), shown[:200]
    assert "python -m" not in shown, shown

    module = MODULES[command]
    main = importlib.import_module(module if command != "browse" else f"{module}.__main__").main
    with pytest.raises(SystemExit) as done:
        main(["--help"])  # what `python -m MODULE --help` runs
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m {module} "), module


def test_an_error_names_the_program_typed(tmp_path, capsys):
    empty = tmp_path / "landing" / "team" / "drop-001"
    empty.mkdir(parents=True)
    with pytest.raises(SystemExit) as done:
        marin_main(["manifest", str(empty)])
    assert done.value.code == 2
    assert capsys.readouterr().err.startswith("marin manifest: error: "), "the error names `marin manifest`"


def test_python_m_still_runs_the_module():
    shown = subprocess.run(
        [sys.executable, "-m", "marin_assets.landing.zone", "--help"], capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: python -m marin_assets.landing.zone "), shown.stdout
