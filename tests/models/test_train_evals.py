"""In-training lm-eval as in Marin: ``default_train`` defaults ``eval_harness_tasks`` to ``CORE_TASKS``;
Levanter's harness runs them during training when their data is local, and a task whose data is
missing fails the step before anything trains, naming the task and ``eval_harness_tasks=()``.

Local task data here: stand-in task YAMLs under the CORE_TASKS names (and an ``mmlu`` group) in a
folder named by ``$MARIN_EVAL_TASKS_PATH`` -- what a team does with tasks it keeps on its own disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.models.test_train_api import inputs, marin_step, resolved  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(600)

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]


def write_standin_tasks(folder: Path, names: list[str], docs: int = 12) -> None:
    """A multiple-choice task YAML (+ jsonl) per name: enough documents for 10-shot prompts."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        rows = [
            {
                "context": f"document {i} says {WORDS[i % 11]}",
                "choices": [f" {WORDS[(i + k) % 11]}." for k in range(3)],
                "label": 0,
            }
            for i in range(docs)
        ]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        task = {
            "task": name,
            "dataset_path": "json",
            "dataset_kwargs": {"data_files": {"test": f"{name}.jsonl"}},
            "test_split": "test",
            "output_type": "multiple_choice",
            "doc_to_text": "{{context}}",
            "target_delimiter": "",
            "doc_to_choice": "{{choices}}",
            "doc_to_target": "{{label}}",
            "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
            "metadata": {"version": 1.0},
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))


def core_task_names() -> list[str]:
    from marin_assets.experiments.evals.task_configs import CORE_TASKS

    return sorted({task.name for task in CORE_TASKS})


def test_default_train_runs_marin_core_tasks_in_training():
    """The step carries Marin's CORE_TASKS (names, few-shot counts, aliases) and steps_per_task_eval."""
    import inspect

    from marin_assets.experiments.defaults import default_train
    from marin_assets.experiments.evals.task_configs import CORE_TASKS

    assert inspect.signature(default_train).parameters["eval_harness_tasks"].default is CORE_TASKS
    assert ("hellaswag", 10, "hellaswag_10shot") in {(t.name, t.num_fewshot, t.task_alias) for t in CORE_TASKS}
    assert len(CORE_TASKS) == 13


def test_string_names_and_groups_expand_as_lm_eval_does(tmp_path, monkeypatch):
    """``"mmlu"`` is a group name: it expands to its subtasks (a local stand-in group here), with the
    tasks' own few-shot default; the same string works in ``default_eval``'s step description."""
    from marin_assets.eval_data.task_data import TASKS_PATH_ENV, check_tasks, prepare_include_path, task_entries
    from marin_assets.experiments.evals.evals import default_eval

    folder = tmp_path / "tasks"
    write_standin_tasks(folder, ["mmlu_standin_a", "mmlu_standin_b"], docs=3)
    group = {"group": "mmlu", "task": ["mmlu_standin_a", "mmlu_standin_b"], "metadata": {"version": 1.0}}
    (folder / "mmlu.yaml").write_text(yaml.safe_dump(group))
    monkeypatch.setenv(TASKS_PATH_ENV, str(folder))
    assert task_entries(["mmlu"]) == [{"task": "mmlu", "num_fewshot": None}]
    _, missing = check_tasks(task_entries(["mmlu"]), prepare_include_path(str(tmp_path / "include")))
    assert missing == []
    from marin_assets.eval_data.lm_eval_main import load_tasks, task_manager

    manager = task_manager(prepare_include_path(str(tmp_path / "include2")), ["mmlu"])
    (group_obj,), _ = load_tasks(task_entries(["mmlu"]), manager)
    assert sorted(t.task_name for t in group_obj.get_all_tasks()) == ["mmlu_standin_a", "mmlu_standin_b"]
    assert "mmlu" in default_eval("/tmp/model/hf/step-1", evals=["mmlu"]).description


@pytest.mark.slow
def test_default_evals_run_during_training_with_local_task_data(inputs, tmp_path, monkeypatch):  # noqa: F811
    """All CORE_TASKS (12 tasks, hellaswag twice) run in Levanter's harness at the end of a 3-step run;
    their numbers reach the step metadata as ``lm_eval/<task alias or name>/acc``."""
    from marin_assets.eval_data.task_data import TASKS_PATH_ENV
    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.evals.task_configs import CORE_TASKS

    write_standin_tasks(tmp_path / "tasks", core_task_names())
    monkeypatch.setenv(TASKS_PATH_ENV, str(tmp_path / "tasks"))
    _, step = marin_step(inputs, eval_harness_tasks=None)
    assert step.config.train_config.eval_harness_tasks == CORE_TASKS
    prefix = str(tmp_path / "prefix")
    report = run_steps([step], prefix)
    assert not report.failed, [o.error for o in report.failed]
    out = Path(StepGraph([step], prefix).resolved(step).output_path)
    meta = json.loads((out / "train_summary.json").read_text())
    for task in CORE_TASKS:
        assert 0.0 <= meta[f"lm_eval/{task.task_alias or task.name}/acc"] <= 1.0, sorted(meta)
    written = yaml.safe_load((out / "train_config.yaml").read_text())
    assert {t["task"] for t in written["eval_harness"]["task_spec"]} == set(core_task_names())


@pytest.mark.slow
def test_missing_task_data_fails_before_training(inputs, tmp_path):  # noqa: F811
    """Offline, CORE_TASKS' hub data is absent: the step fails naming the task and eval_harness_tasks=(),
    with no checkpoint, no export and no train_config.yaml written."""
    from marin_assets.eval_data.task_data import TaskDataMissing
    from marin_assets.training.training import run_levanter_train_lm

    _, step = marin_step(inputs, eval_harness_tasks=None)
    pod = resolved(step, str(tmp_path / "prefix"))
    with pytest.raises(TaskDataMissing) as info:
        run_levanter_train_lm(pod)
    message = str(info.value)
    assert "'arc_easy'" in message and "allenai/ai2_arc" in message
    assert "eval_harness_tasks=()" in message
    out = Path(pod.output_path)
    assert not (out / "checkpoints").exists() and not (out / "hf").exists()
    assert not (out / "train_config.yaml").exists()
