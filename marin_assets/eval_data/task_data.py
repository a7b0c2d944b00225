"""Where lm-eval task data comes from offline, shared by the evaluation step and in-training evals.

A task runs when lm-eval can build it with ``HF_DATASETS_OFFLINE=1``: its data is in the local Hugging
Face cache or in the hub mirror (the evaluation step, and training for its in-training evals, fetch a
missing task's dataset from the hub unless ``HF_HUB_OFFLINE=1``, see :mod:`.lm_eval_main` and
:data:`HUB_FETCH_ENV`), or the task is given as task YAML with local ``data_files`` -- the tasks shipped in
``eval_tasks/`` (``marin_docstring_*``, :data:`SHIPPED_TASKS`), a folder passed as ``include_path``, or
the folders named by the environment variable :data:`TASKS_PATH_ENV` (``os.pathsep``-separated; a YAML
there may define a task under a built-in name, e.g. a local stand-in for ``arc_easy``, and wins over
lm-eval's own). A task whose data is missing -- or whose code needs an optional package that is not
installed (the message names it: ``pip install wonderwords``) -- is reported before anything runs
(:class:`TaskDataMissing`).

Task names are lm-eval's: an ``EvalTaskConfig`` (name, few-shot count, alias: an :class:`EvalTask`) or a
plain string, which lm-eval resolves as it does on its command line -- a task, or a group such as
``mmlu`` that expands to its subtasks, with the task's own few-shot default. Imports nothing of
training or of the evaluation step, so the training subprocess uses it too.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from marin_assets.eval_data.lm_eval_main import load_tasks, task_manager
from marin_assets.execution.step import unwrap_versioned_value

EVAL_TASKS_DIR = os.path.join(os.path.dirname(__file__), "eval_tasks")
SHIPPED_TASKS = ("marin_docstring_mc", "marin_docstring_cloze", "marin_docstring_ppl")
TASKS_PATH_ENV = "MARIN_EVAL_TASKS_PATH"
# Set by a step that may reach the hub for the offline subprocess it starts (training's in-training
# evals): a task whose data is not on this machine is fetched into the hub mirror, as the evaluation
# step does (lm_eval_main).
HUB_FETCH_ENV = "MARIN_EVAL_DATA_FROM_HUB"
OFFLINE_TASK_HINT = (
    "nothing is downloaded at run time: on a machine with network run "
    "`python -c \"import datasets; datasets.load_dataset('{dataset}')\"` and copy the Hugging Face cache "
    "($HF_HOME, default ~/.cache/huggingface) here, or give the task as a local task YAML "
    f"(EvaluationConfig.include_path, or a folder named by ${TASKS_PATH_ENV}) whose data_files are local"
)


class EvalTask(Protocol):
    """One lm-eval task as :func:`task_entries` reads it: Marin's ``EvalTaskConfig``
    (``marin.evaluation.evaluation_config``) is one. Training names this, not the evaluation step's
    config class, so it does not import the evaluation step."""

    @property
    def name(self) -> str: ...

    @property
    def num_fewshot(self) -> int: ...

    @property
    def task_alias(self) -> str | None: ...


class TaskDataMissing(FileNotFoundError):
    """An lm-eval task whose data is not available offline."""


def task_entries(evals: Any) -> list[dict[str, Any]]:
    """lm-eval task specs ``{"task", "num_fewshot", "task_alias"}`` from ``EvalTaskConfig`` s, names or dicts.

    A plain string is an lm-eval name (task or group) run with its own few-shot default
    (``num_fewshot`` None), as ``lm_eval --tasks NAME`` would.
    """
    specs = []
    for task in unwrap_versioned_value(evals) or []:
        task = unwrap_versioned_value(task)
        if isinstance(task, str):
            specs.append({"task": task, "num_fewshot": None})
            continue
        if isinstance(task, Mapping):
            name, fewshot, alias = task["task"], task.get("num_fewshot"), task.get("task_alias")
        else:
            name, fewshot, alias = task.name, task.num_fewshot, task.task_alias
        spec: dict[str, Any] = {"task": name, "num_fewshot": fewshot}
        if alias:
            spec["task_alias"] = alias
        specs.append(spec)
    return specs


def task_label(task: Any) -> str:
    """A task's display name: its alias, else its lm-eval name (``EvalTaskConfig``, string or dict)."""
    (spec,) = task_entries([task])
    return spec.get("task_alias") or spec["task"]


def env_task_folders() -> list[str]:
    """The folders of task YAMLs named by :data:`TASKS_PATH_ENV`."""
    return [p for p in os.environ.get(TASKS_PATH_ENV, "").split(os.pathsep) if p]


def _copy_tasks(source: str, dest: str) -> None:
    """Copy the task YAMLs of ``source`` to ``dest`` with relative ``data_files`` made absolute.

    lm-eval resolves relative ``data_files`` against the working directory, not the YAML's folder.
    """
    import yaml

    os.makedirs(dest, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(source, "**", "*.yaml"), recursive=True)):
        with open(path) as handle:
            task = yaml.safe_load(handle)
        files = (task or {}).get("dataset_kwargs", {}).get("data_files", {}) if isinstance(task, dict) else {}
        if isinstance(files, Mapping):
            for split, name in list(files.items()):
                if isinstance(name, str) and not os.path.isabs(name) and "://" not in name:
                    files[split] = os.path.join(os.path.dirname(os.path.abspath(path)), name)
        target = os.path.join(dest, os.path.relpath(path, source))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as handle:
            yaml.safe_dump(task, handle, sort_keys=False)


def prepare_include_path(dest: str, extra: str | None = None) -> str:
    """A folder for lm-eval's ``include_path``: the shipped tasks, the :data:`TASKS_PATH_ENV` folders and
    ``extra`` (each copied with its ``data_files`` made absolute); returns ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    _copy_tasks(EVAL_TASKS_DIR, dest)
    for i, folder in enumerate(env_task_folders()):
        _copy_tasks(folder, os.path.join(dest, f"env{i}"))
    if extra:
        _copy_tasks(extra, os.path.join(dest, "extra"))
    return dest


def missing_message(missing: Iterable[Mapping[str, Any]], remedy: str = "") -> str:
    """One line per missing task: its name, dataset, cause, and how to make it available -- for a task
    whose code imports an optional package that is not installed, the package to install."""
    lines = []
    for item in missing:
        dataset = item.get("dataset") or item["task"]
        if item.get("package"):
            lines.append(
                f"lm-eval task {item['task']!r} needs the Python package {item['package']!r}, which is not "
                f"installed ({item['cause']}): pip install {item['package']}"
            )
            continue
        lines.append(
            f"lm-eval task {item['task']!r} (dataset {dataset}) is not available offline ({item['cause']}); "
            + (f"{remedy}; or " if remedy else "")
            + OFFLINE_TASK_HINT.format(dataset=dataset)
        )
    return "\n".join(lines)


def check_tasks(
    specs: Sequence[dict[str, Any]], include_path: str, hub: bool = False
) -> tuple[Any, list[dict[str, Any]]]:
    """Build every task offline (its data loads); returns ``(TaskManager, missing)``. With ``hub``, a
    task whose data is not local is fetched from the hub into the mirror first, and its spec gets
    ``"dataset_path"``: the folder it was built from.

    The manager indexes lm-eval's built-in tasks only when a name is not among the local YAMLs
    (indexing them takes about half a minute on a busy machine).
    """
    manager = task_manager(include_path, [spec["task"] for spec in specs])
    _, missing = load_tasks(list(specs), manager, hub=hub)
    return manager, missing


def hub_fetch_requested() -> bool:
    """Whether this (offline) subprocess may fetch missing task data from the hub: its parent, which
    was not run with ``HF_HUB_OFFLINE=1``, says so with :data:`HUB_FETCH_ENV`."""
    return os.environ.get(HUB_FETCH_ENV) == "1"
