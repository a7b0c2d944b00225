"""``executor_main``'s flags, declared once in ``ExecutorMainConfig`` and parsed by draccus.

Parity is checked against plain draccus (Marin's parser): the same command line gives the same
config. A script that passes its own ``ExecutorMainConfig`` still honours ``--dry_run`` and
``--prefix`` from the command line (issue 31.5), and keeps its flags of its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import draccus
import pytest

from marin_assets.execution.executor_main import ExecutorMainConfig, build_parser, parse_config

REPO = Path(__file__).resolve().parents[2]

CONFIGURED_SCRIPT = textwrap.dedent(
    '''
    """A Marin script that builds its own ExecutorMainConfig and has a flag of its own."""
    import argparse
    import json
    from dataclasses import dataclass

    from marin.execution.executor import ExecutorMainConfig, ExecutorStep, executor_main, this_output_path, versioned
    from marin_assets.execution.storage import atomic_write_text


    @dataclass(frozen=True)
    class Cfg:
        output_path: str
        value: int


    def write(config: Cfg) -> None:
        atomic_write_text(f"{config.output_path}/value.json", json.dumps(config.value))


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--own_flag")
        parser.parse_known_args()  # the script's flags; executor_main reads its own from the same argv
        step = ExecutorStep(name="own/value", fn=write, config=Cfg(this_output_path(), versioned(7)))
        executor_main(ExecutorMainConfig(prefix=SCRIPT_PREFIX, no_record=True), [step])
    '''
)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--dry_run", "true", "--prefix", "gs://bucket/marin"],
        ["--force_run_failed", "false", "--run_only", "[tokenized/a, checkpoints/.*]", "--max_concurrent", "3"],
        ["--executor_info_base_path", "/tmp/records", "--dry_run", "false", "--no_record", "true"],
        ["--heartbeat_s", "5", "--stale_s", "15.5", "--partitions", "[drops=a, shards=s]"],
    ],
)
def test_the_command_line_parses_as_draccus_parses_it(argv):
    assert parse_config(argv) == draccus.parse(ExecutorMainConfig, args=argv)


def test_one_flag_per_field_and_the_shorter_forms():
    flags = {a.dest for a in build_parser()._actions if a.option_strings and a.dest not in ("help", "config_path")}
    assert flags == {f.name for f in dataclasses.fields(ExecutorMainConfig)}
    # Ours besides draccus's: a boolean without a value, plain list items.
    assert parse_config(["--dry_run", "--run_only", "a", "b"]) == ExecutorMainConfig(dry_run=True, run_only=["a", "b"])
    assert parse_config(["--partitions", "drops=d1,d2", "shards=s"]).partitions == ["drops=d1,d2", "shards=s"]
    with pytest.raises(SystemExit):
        parse_config(["--dry_run", "maybe"])
    with pytest.raises(SystemExit):  # no abbreviations, as with draccus
        parse_config(["--dry", "true"])


def test_a_scripts_own_config_gives_the_defaults_and_the_command_line_wins():
    own = ExecutorMainConfig(prefix="/script/prefix", max_concurrent=2)
    assert parse_config([], base=own) == own
    given = parse_config(["--dry_run", "true", "--prefix", "/cli/prefix", "--model", "1b"], base=own)
    assert given == dataclasses.replace(own, dry_run=True, prefix="/cli/prefix")
    with pytest.raises(SystemExit):  # without a config of the script's, an unknown flag is an error
        parse_config(["--model", "1b"])


def test_a_draccus_config_file_overrides_a_scripts_own_config(tmp_path):
    own = ExecutorMainConfig(prefix="/script/prefix", max_concurrent=2)
    config = tmp_path / "run.yaml"
    config.write_text("prefix: /file/prefix\nrun_only: [a, b]\n")
    given = parse_config(["--config_path", str(config), "--dry_run", "true"], base=own)
    assert given == dataclasses.replace(own, prefix="/file/prefix", run_only=["a", "b"], dry_run=True)
    assert parse_config(["--config_path", str(config)]) == ExecutorMainConfig(
        prefix="/file/prefix", run_only=["a", "b"]
    )


def _run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_script_passing_its_own_config_honours_dry_run_and_prefix(tmp_path, dagster_home):
    script_prefix = tmp_path / "script_prefix"
    script = tmp_path / "own_config.py"
    script.write_text(CONFIGURED_SCRIPT.replace("SCRIPT_PREFIX", repr(str(script_prefix))))
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    dry = _run(script, "--dry_run", "true", "--own_flag", "x", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run: 0 skip, 1 run" in dry.stdout and not script_prefix.exists(), dry.stdout

    cli_prefix = tmp_path / "cli_prefix"
    moved = _run(script, "--prefix", str(cli_prefix), env=env)
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout.strip().splitlines()[-1])["prefix"] == str(cli_prefix)
    assert list(cli_prefix.glob("own/value-*/value.json")) and not script_prefix.exists()

    own = _run(script, env=env)  # nothing on the command line: the script's own prefix
    assert own.returncode == 0, own.stderr
    assert list(script_prefix.glob("own/value-*/value.json"))


def test_a_draccus_wrapped_main_hands_its_parsed_config_on(tmp_path, dagster_home):
    """Marin's integration-test pattern: ``@draccus.wrap() def main(config: ExecutorMainConfig)`` parses
    the command line into this project's ``ExecutorMainConfig`` and calls ``executor_main(config, steps)``."""
    script = tmp_path / "wrapped.py"
    body = CONFIGURED_SCRIPT.split('if __name__ == "__main__":')[0]
    script.write_text(
        body
        + textwrap.dedent(
            """
            import draccus


            @draccus.wrap()
            def main(config: ExecutorMainConfig):
                step = ExecutorStep(name="own/value", fn=write, config=Cfg(this_output_path(), versioned(7)))
                executor_main(config, [step])


            if __name__ == "__main__":
                main()
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    prefix = tmp_path / "out"
    dry = _run(script, "--prefix", str(prefix), "--dry_run", "true", "--no_record", "true", env=env)
    assert dry.returncode == 0, dry.stderr
    assert "dry run: 0 skip, 1 run" in dry.stdout and not prefix.exists(), dry.stdout
    ran = _run(script, "--prefix", str(prefix), "--no_record", "true", env=env)
    assert ran.returncode == 0, ran.stderr
    assert list(prefix.glob("own/value-*/value.json"))
