"""Run observers register themselves; the engine names none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from marin_assets.execution import observers

REPO = Path(__file__).resolve().parents[2]


def test_the_engine_names_no_dagster_module():
    engine = REPO / "marin_assets" / "execution"
    for path in engine.glob("*.py"):
        assert "dagster_bridge" not in path.read_text(), path


def test_importing_the_bridge_registers_its_recorder_and_the_package_declares_it():
    # A fresh interpreter: what executor_main loads by default, and what that import registers.
    code = (
        "from marin_assets.execution.observers import declared_plugins, load_run_observers\n"
        "print(declared_plugins())\n"
        "print([f'{o.__module__}.{o.__name__}' for o in load_run_observers()])\n"
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == [
        "['marin_assets.dagster_bridge.recording']",
        "['marin_assets.dagster_bridge.recording.record_cli_run']",
    ]


def test_registration_order_env_override_and_unregister(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(observers, "_REGISTERED", {})
    observers.register_run_observer("later", lambda **_: calls.append("later"))
    observers.register_run_observer("first", lambda **_: calls.append("first"), first=True)
    # An explicit empty list loads no plugin; observers registered in the process still run.
    monkeypatch.setenv(observers.ENV_VAR, "")
    for observer in observers.load_run_observers():
        observer(graph=None)
    assert calls == ["first", "later"]
    # module:callable entries are loaded and registered under their spec.
    monkeypatch.setenv(observers.ENV_VAR, "tests.execution.test_observers:_marker")
    assert observers.load_run_observers()[-1] is _marker
    observers.unregister_run_observer("first")
    observers.unregister_run_observer("tests.execution.test_observers:_marker")
    assert list(observers.registered_run_observers()) == ["later"]


def _marker(**_: object) -> None:
    """An observer named in ``$MARIN_RUN_OBSERVERS``."""
