"""Marin's programmatic ``Executor(prefix, executor_info_base_path).run(steps, ...)``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from marin_assets.execution.executor import (
    Executor,
    ExecutorMainConfig,
    ExecutorStep,
    get_executor_step,
    output_path_of,
    this_output_path,
    versioned,
)


@dataclass(frozen=True)
class WriteConfig:
    output_path: str
    value: int
    source: str | None = None


def write_value(config: WriteConfig) -> None:
    Path(config.output_path).mkdir(parents=True, exist_ok=True)
    Path(config.output_path, "value.json").write_text(json.dumps({"value": config.value, "source": config.source}))


def test_executor_run_dry_run_and_output_paths(prefix, tmp_path, capsys):
    first = ExecutorStep(name="api/first", fn=write_value, config=WriteConfig(this_output_path(), versioned(1)))
    second = ExecutorStep(
        name="api/second",
        fn=write_value,
        config=WriteConfig(this_output_path(), versioned(2), source=output_path_of(first, "value.json")),
    )
    info_base = str(tmp_path / "records")
    executor = Executor(prefix=prefix, executor_info_base_path=info_base, description="api test")
    assert executor.run([output_path_of(second)], dry_run=True) is None
    assert "dry run: 0 skip, 2 run" in capsys.readouterr().out
    report = executor.run([second])
    assert len(report.by_action("ran")) == 2
    assert executor.output_paths[second].startswith(f"{prefix}/api/second-")
    written = json.loads(Path(executor.output_paths[second], "value.json").read_text())
    assert written == {"value": 2, "source": f"{executor.output_paths[first]}/value.json"}
    assert executor.versions[second]["dependencies"] == [executor.versions[first]]
    assert Path(executor.executor_info_path).parent == Path(info_base)
    assert len(Executor(prefix=prefix).run([second]).by_action("cached")) == 2
    assert get_executor_step(output_path_of(first)) is first
    assert ExecutorMainConfig().force_run_failed is True and ExecutorMainConfig().max_concurrent is None


def test_pip_dependency_groups_decide_whether_an_in_process_step_goes_to_ray(monkeypatch):
    from marin_assets.execution.ray_launch import runs_in_process
    from marin_resources.runtime_env import runtime_env_for

    monkeypatch.delenv("MARIN_STEPS_ON_RAY", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    installed = ExecutorStep(
        name="api/a", fn=write_value, config=WriteConfig("x", 1), pip_dependency_groups=["dagster"]
    )
    missing = ExecutorStep(
        name="api/b", fn=write_value, config=WriteConfig("x", 1), pip_dependency_groups=["no-such-package-xyz==1.0"]
    )
    assert runs_in_process(installed, runtime_env_for(installed.pip_dependency_groups))
    env = runtime_env_for(missing.pip_dependency_groups)
    assert env["pip"] == ["no-such-package-xyz==1.0"]
    assert not runs_in_process(missing, env)  # honoured: it runs on Ray with the requirement installed


def test_marin_execution_package_exports_marins_names(prefix):
    """``from marin.execution import ...`` (Marin's package) maps to ``marin_assets.execution``."""
    import marin_assets.execution as package
    import marin_assets.execution.executor as module

    for name in ("Executor", "ExecutorMainConfig", "ExecutorStep", "THIS_OUTPUT_PATH", "get_executor_step"):
        assert getattr(package, name) is getattr(module, name), name
    statuses = ("SUCCESS", "FAILED", "RUNNING", "DEP_FAILED", "WAITING", "CANCELLED")
    assert [getattr(package, f"STATUS_{s}") for s in statuses] == list(statuses)
    step = ExecutorStep(name="api/pkg", fn=write_value, config=WriteConfig(this_output_path(), versioned(3)))
    package.Executor(prefix=prefix, executor_info_base_path=f"{prefix}/records").run([step])
    assert json.loads(Path(prefix).glob("api/pkg-*/value.json").__next__().read_text())["value"] == 3


def test_executor_main_takes_a_config_object_like_draccus(prefix, monkeypatch):
    """Marin scripts call ``executor_main(ExecutorMainConfig(...), steps)``: the config replaces the
    command line (which is not parsed), as draccus.wrap does."""
    from marin_assets.execution.executor import executor_main

    monkeypatch.setattr("sys.argv", ["script.py", "--unknown_flag_of_the_caller", "x"])
    step = ExecutorStep(name="api/cfg", fn=write_value, config=WriteConfig(this_output_path(), versioned(4)))
    config = ExecutorMainConfig(prefix=prefix, executor_info_base_path=f"{prefix}/records", dry_run=True)
    assert executor_main(config, [step]) is None and not list(Path(prefix).glob("api/cfg-*"))
    report = executor_main(ExecutorMainConfig(prefix=prefix, max_concurrent=1), steps=[step], description="d")
    assert len(report.by_action("ran")) == 1 and list(Path(prefix, "experiments").glob("*.json"))
    again = executor_main(ExecutorMainConfig(prefix=prefix, run_only=["api/cfg"]), [step], "with a description")
    assert len(again.by_action("cached")) == 1


def test_info_and_record_carry_marins_step_info_keys(prefix):
    """Marin's ``ExecutorStepInfo`` keys (name, fn_name, config, description, override_output_path,
    version, dependencies, output_path) in ``.executor_info`` and in the experiment record's steps."""
    first = ExecutorStep(name="api/info_a", fn=write_value, config=WriteConfig(this_output_path(), versioned(5)))
    second = ExecutorStep(
        name="api/info_b",
        fn=write_value,
        config=WriteConfig(this_output_path(), 6, source=output_path_of(first)),
        override_output_path="fixed/info_b",
    )
    executor = Executor(prefix=prefix)
    executor.run([second])
    marin_keys = {"name", "fn_name", "description", "override_output_path", "version", "dependencies", "output_path"}
    info = json.loads(Path(prefix, "fixed/info_b/.executor_info").read_text())
    assert marin_keys | {"config"} <= set(info)
    assert info["fn_name"].endswith("write_value") and info["override_output_path"] == "fixed/info_b"
    record = json.loads(Path(executor.executor_info_path).read_text())
    by_name = {s["name"]: s for s in record["steps"]}
    assert marin_keys <= set(by_name["api/info_b"])
    assert by_name["api/info_b"]["dependencies"] == [executor.output_paths[first]]
