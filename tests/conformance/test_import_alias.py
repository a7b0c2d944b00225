"""Marin's module names resolve to this project without editing a script (``marin_alias``).

Each test runs a fresh interpreter whose ``sitecustomize`` installs the finder exactly as the
``marin_alias.pth`` line of an installed project does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.marin_import import SCRIPTS, alias_env, recorded_paths, run_unmodified, summary


def python(code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


IDENTITY = """
import json
import marin.execution.executor as a, marin_assets.execution.executor as b
import marin.processing.classification.consolidate as c, marin_assets.processing.classification.consolidate as d
from fray.cluster import ResourceConfig
from fray.v2 import ResourceConfig as V2ResourceConfig
from marin.resources import GpuConfig
import marin_resources, experiments.defaults as e, marin_assets.experiments.defaults as f
from experiments.defaults import default_download
from experiments.llama import llama_1_4b_train_config
print(json.dumps({
    "executor": a is b, "consolidate": c is d, "spec": a.__spec__.name,
    "fray": ResourceConfig is marin_resources.ResourceConfig is V2ResourceConfig, "resources": GpuConfig is marin_resources.GpuConfig,
    "experiments": e is f and default_download is f.default_download, "class_module": a.ExecutorStep.__module__,
}))
"""


def test_marin_names_are_this_projects_modules(tmp_path):
    proc = python(IDENTITY, tmp_path, alias_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {
        "executor": True,
        "consolidate": True,
        "spec": "marin_assets.execution.executor",  # the module keeps its own spec
        "fray": True,
        "resources": True,
        "experiments": True,  # no team package here: the built-ins
        "class_module": "marin_assets.execution.step",  # pickles name the real module
    }


def test_a_name_this_project_lacks_says_so(tmp_path):
    proc = python("import marin.speedrun.speedrun", tmp_path, alias_env(tmp_path))
    assert proc.returncode == 1
    assert "No module named 'marin.speedrun'" in proc.stderr and "'marin_assets.speedrun' does not exist" in proc.stderr


def test_real_marin_wins_when_installed(tmp_path):
    real = tmp_path / "site" / "marin"
    (real / "execution").mkdir(parents=True)
    (real / "__init__.py").write_text("REAL = True\n")
    (real / "execution" / "__init__.py").write_text("WHERE = 'real marin'\n")
    code = "import marin, marin.execution; print(marin.REAL, marin.execution.WHERE, marin.__name__)"
    proc = python(code, tmp_path, alias_env(tmp_path, extra_path=str(tmp_path / "site")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "real", "marin", "marin"]


def test_a_bare_folder_named_marin_is_not_real_marin(tmp_path):
    """A checkout called ``marin`` in the working directory (no ``__init__.py``) does not count."""
    (tmp_path / "marin" / "lib").mkdir(parents=True)
    proc = python("import marin; print(marin.__name__)", tmp_path, alias_env(tmp_path, extra_path=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "marin_assets"


def test_the_switch_turns_it_off(tmp_path):
    proc = python("import marin.execution", tmp_path, alias_env(tmp_path, MARIN_IMPORT_ALIAS="0"))
    assert proc.returncode == 1 and "No module named 'marin'" in proc.stderr


def test_hello_world_runs_as_written_with_marins_hashes(tmp_path, prefix):
    """The unedited script (``from marin.execution.executor import ...``): Marin's hashes (pinned in
    ``test_marin_scripts``), a cached re-run."""
    script = tmp_path / "hello_world.py"
    script.write_text((SCRIPTS / "hello_world.py").read_text())
    assert "from marin.execution.executor import" in script.read_text()
    env = alias_env(tmp_path)
    first = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert recorded_paths(prefix) == {
        "hello_world/data": ["hello_world/data-bd4f05"],
        "hello_world/stats": ["hello_world/stats-8118f4"],
    }
    again = summary(run_unmodified(script, prefix, cwd=str(tmp_path), env=env))
    assert (again["ran"], again["cached"]) == (0, 2)


@pytest.mark.slow
def test_the_wheel_and_the_editable_wheel_carry_the_pth_line(tmp_path):
    """``setup.py`` puts ``marin_alias.pth`` at the root of both wheels (what ``pip install`` and
    ``pip install -e .`` install); its line installs the finder."""
    import shutil
    import zipfile

    repo = Path(__file__).resolve().parents[2]
    source = tmp_path / "src"
    shutil.copytree(
        repo, source, ignore=shutil.ignore_patterns(".venv", ".git", "data", "*.egg-info", "build", "__pycache__")
    )
    code = (
        "import setuptools.build_meta as b, sys; d = sys.argv[1]; "
        "names = [b.build_wheel(d), b.build_editable(d)]; print('WHEELS', *names)"
    )
    out = tmp_path / "dist"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheel, editable = next(line for line in proc.stdout.splitlines() if line.startswith("WHEELS")).split()[1:]
    for name in (wheel, editable):
        with zipfile.ZipFile(out / name) as archive:
            assert archive.read("marin_alias.pth").decode() == (
                "import marin_alias as _marin_alias; _marin_alias.install()\n"
            )
