"""The installed ``marin`` console script: every subcommand's ``--help``, and the cheap ones end to end.

Each test starts ``.venv/bin/marin`` (the script ``pip install`` wrote from ``[project.scripts]``) as
a user would, in a subprocess with its own prefix, Dagster home and Ray temp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marin_assets.cli.main import COMMANDS

REPO = Path(__file__).resolve().parents[2]
MARIN = Path(sys.executable).parent / "marin"
SCRIPT = textwrap.dedent(
    '''
    """A team's script: two steps; the second reads the first."""
    import json
    import sys
    from dataclasses import dataclass

    from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
    from marin_assets.execution.storage import atomic_write_text


    @dataclass(frozen=True)
    class Cfg:
        output_path: str
        value: int
        source: str | None = None


    def write(config: Cfg) -> None:
        atomic_write_text(f"{config.output_path}/value.json", json.dumps(config.value))


    first = ExecutorStep(name="cli/first", fn=write, config=Cfg(this_output_path(), versioned(1)))
    second = ExecutorStep(name="cli/second", fn=write, config=Cfg(this_output_path(), versioned(2), output_path_of(first)))

    if __name__ == "__main__":
        executor_main(steps=[first, second], description="cli test")
    '''
)


def marin(*args: str, env: dict[str, str] | None = None, cwd: Path = REPO, timeout: float = 300):
    return subprocess.run(
        [str(MARIN), *args], cwd=cwd, env=env or os.environ.copy(), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def user_env(tmp_path, dagster_home, session_ray_tmpdir) -> dict[str, str]:
    """A user's shell: no prefix set, the test's Dagster home and the session's Ray temp dir."""
    env = {k: v for k, v in os.environ.items() if k not in ("MARIN_PREFIX", "RAY_ADDRESS")}
    env["MARIN_RAY_TMPDIR"] = session_ray_tmpdir
    return env


def test_the_console_script_is_installed_and_lists_every_subcommand():
    assert MARIN.is_file(), f"{MARIN}: install the project (pip install -e .) so [project.scripts] writes it"
    shown = marin("--help")
    assert shown.returncode == 0, shown.stderr
    for command in COMMANDS:
        assert f"  {command.name}  " in shown.stdout, (command.name, shown.stdout)
    # No command at all: the same listing, and a usage error's status.
    assert marin().returncode == 2
    wrong = marin("no-such-command")
    assert wrong.returncode == 2 and "no-such-command" in wrong.stderr


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_every_subcommand_documents_itself(command):
    shown = marin(command, "--help")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith("usage: "), shown.stdout[:300]
    assert "--help" in shown.stdout or "-h" in shown.stdout or command == "quickstart"


@pytest.mark.parametrize("command", ["run", "quickstart"])
def test_run_and_quickstart_help_lists_every_executor_main_flag_from_the_dataclass(command):
    from dataclasses import fields

    from marin_assets.execution.executor_main import ExecutorMainConfig

    shown = marin(command, "--help").stdout
    missing = [f.name for f in fields(ExecutorMainConfig) if f"--{f.name}" not in shown]
    assert not missing, (missing, shown)
    assert "(default: true)" in shown  # --force_run_failed's default, as Marin has it


def test_sample_drop_then_manifest_of_a_hand_made_drop(tmp_path, user_env):
    prefix = tmp_path / "prefix"
    wrote = marin("sample-drop", "--prefix", str(prefix), "--drop", "drop-007", "--docs", "6", env=user_env)
    assert wrote.returncode == 0, wrote.stderr
    drop = prefix / "landing" / "sample-html" / "drop-007"
    manifest = json.loads((drop / "manifest.json").read_text())
    assert manifest["drop_id"] == "drop-007" and sum(f["records"] for f in manifest["files"]) == 6

    folder = prefix / "landing" / "team" / "drop-001"
    folder.mkdir(parents=True)
    (folder / "part-0.jsonl").write_text('{"id": "a", "text": "hello"}\n')
    made = marin("manifest", str(folder), env=user_env)
    assert made.returncode == 0, made.stderr
    written = json.loads((folder / "manifest.json").read_text())
    assert [f["path"] for f in written["files"]] == ["part-0.jsonl"] and written["drop_id"] == "drop-001"
    # A folder with nothing in it: one line, non-zero status, no manifest.
    empty = prefix / "landing" / "team" / "drop-002"
    empty.mkdir()
    refused = marin("manifest", str(empty), env=user_env)
    assert refused.returncode != 0 and not (empty / "manifest.json").exists()


def test_run_a_script_file_dry_run_then_for_real_then_cached(tmp_path, user_env):
    script = tmp_path / "team" / "two_steps.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    prefix = tmp_path / "out"
    dry = marin("run", str(script), "--prefix", str(prefix), "--dry_run", "true", env=user_env)
    assert dry.returncode == 0, dry.stderr
    assert "cli/first" in dry.stdout and "dry run: 0 skip, 2 run" in dry.stdout, dry.stdout
    assert not list(prefix.glob("cli/*")), "a dry run wrote outputs"

    ran = marin("run", str(script), "--prefix", str(prefix), "--no_record", "--run_only", "[cli/first]", env=user_env)
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout.strip().splitlines()[-1])
    assert (summary["ran"], summary["prefix"]) == (1, str(prefix)), summary
    assert [p.name.split("-")[0] for p in (prefix / "cli").iterdir()] == ["first"]

    again = marin("run", str(script), "--prefix", str(prefix), "--no_record", env=user_env)
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert (summary["ran"], summary["cached"]) == (1, 1), again.stdout + again.stderr


def test_run_a_module_and_a_missing_script(tmp_path, user_env):
    prefix = tmp_path / "out"
    dry = marin("run", "marin_assets.experiments.hello_world", "--prefix", str(prefix), "--dry_run", env=user_env)
    assert dry.returncode == 0 and "hello_world/stats" in dry.stdout, dry.stdout + dry.stderr
    missing = marin("run", str(tmp_path / "nope.py"), env=user_env)
    assert missing.returncode == 2 and "no such script" in missing.stderr


def test_unknown_flags_of_a_script_without_a_config_of_its_own_are_an_error(tmp_path, user_env):
    """Unknown flags of a script that passes no config of its own are an error, as with draccus."""
    script = tmp_path / "two_steps.py"
    script.write_text(SCRIPT)
    bad = marin("run", str(script), "--prefix", str(tmp_path / "out"), "--no_such_flag", "1", env=user_env)
    assert bad.returncode == 2 and "unrecognized arguments: --no_such_flag" in bad.stderr, bad.stderr


def test_ray_stop_on_a_machine_without_an_embedded_head(tmp_path, user_env):
    temp_dir = tmp_path / "ray"
    temp_dir.mkdir()
    stopped = marin("ray", "stop", "--temp_dir", str(temp_dir), env=user_env)
    assert stopped.returncode == 0, stopped.stderr
    assert str(temp_dir) in stopped.stdout
    assert marin("ray", env=user_env).returncode == 2  # the action is required


def test_python_dash_m_paths_the_docs_named_still_work(tmp_path, user_env):
    prefix = tmp_path / "prefix"
    cmd = [sys.executable, "-m", "marin_assets.experiments.sample_data", "--prefix", str(prefix), "--drop", "drop-001"]
    wrote = subprocess.run([*cmd, "--docs", "3"], cwd=REPO, env=user_env, capture_output=True, text=True, timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    assert (prefix / "landing" / "sample-html" / "drop-001" / "manifest.json").is_file()
    cli = subprocess.run(
        [sys.executable, "-m", "marin_assets.cli", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert cli.returncode == 0 and "sample-drop" in cli.stdout


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_ray_stop_stops_a_running_embedded_head(user_env):
    import tempfile

    import psutil

    temp_dir = tempfile.mkdtemp(prefix="mrt-cli-", dir="/tmp")  # short: Ray's socket paths are limited
    start = (
        "from marin_resources.ray_config import RayClusterConfig; "
        "from marin_resources.ray_head import start_embedded_head; "
        f"print(start_embedded_head(RayClusterConfig(temp_dir={temp_dir!r}, num_cpus=1)))"
    )
    started = subprocess.run(
        [sys.executable, "-c", start], cwd=REPO, env=user_env, capture_output=True, text=True, timeout=240
    )
    assert started.returncode == 0, started.stderr[-3000:]

    def head_processes() -> list[int]:
        found = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if temp_dir in " ".join(proc.info["cmdline"] or []):
                    found.append(proc.info["pid"])
            except psutil.Error:
                continue
        return found

    assert head_processes(), "the embedded head did not start"
    stopped = marin("ray", "stop", "--temp_dir", temp_dir, env=user_env)
    assert stopped.returncode == 0, stopped.stderr
    assert not head_processes(), "processes of the embedded head outlived `marin ray stop`"


def test_invalidate_then_the_next_run_recomputes_and_gc_keeps_what_records_reference(tmp_path, user_env):
    script = tmp_path / "two_steps.py"
    script.write_text(SCRIPT)
    prefix = str(tmp_path / "out")
    first = marin("run", str(script), "--prefix", prefix, "--no_record", env=user_env)
    assert json.loads(first.stdout.strip().splitlines()[-1])["ran"] == 2, first.stderr
    marked = marin("invalidate", "cli/first", "--prefix", prefix, "--yes", env=user_env)
    assert marked.returncode == 0, marked.stderr
    assert "cli/first" in marked.stdout and "cli/second" in marked.stdout  # the step and its descendant
    again = marin("run", str(script), "--prefix", prefix, "--no_record", env=user_env)
    assert json.loads(again.stdout.strip().splitlines()[-1])["ran"] == 2, again.stdout + again.stderr
    listed = subprocess.run(
        [str(MARIN), "gc", "--prefix", prefix], input="n\n", env=user_env, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0 and "0 unreferenced output(s)" in listed.stdout, listed.stdout + listed.stderr
