"""In-training lm-eval (Levanter's ``eval_harness`` hook), as Marin's ``default_train`` sets it up.

Runs in the training subprocess, before Levanter's ``train_lm`` main:

1. :func:`check_harness_tasks` builds every task offline (:mod:`marin_assets.eval_data.task_data`),
   fetching a task's missing data from the hub into the mirror when the step may reach the hub;
   when one has no data it writes them to ``missing_tasks_path`` and raises
   :class:`~marin_assets.eval_data.task_data.TaskDataMissing` -- before the model is built, so
   nothing trains. The step turns that into an error naming each task and ``eval_harness_tasks=()``.
2. :func:`use_local_tasks` points Levanter's harness at the same task index: Levanter builds its
   tasks with lm-eval's ``TaskManager()`` (built-in tasks only), so the index that passed the check
   -- shipped tasks, ``$MARIN_EVAL_TASKS_PATH`` folders, the HF cache -- is handed to it instead.
   It also keeps Levanter's macro/micro averages to numeric metrics (lm-eval 0.4.13 reports string
   fields such as ``name`` in a result, on which Levanter's ``np.mean`` fails).

Levanter runs the harness every ``eval_harness_steps`` and once more at the end of training, and logs
``lm_eval/<task>/<metric>`` to the tracker (they reach the step's metadata, see ``training.py``).
Levanter's harness scores ``loglikelihood`` and ``multiple_choice`` tasks; ``loglikelihood_rolling`` and
generation tasks belong in an evaluation step (``experiments.evals.default_eval``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from marin_assets.eval_data.task_data import (
    TaskDataMissing,
    check_tasks,
    hub_fetch_requested,
    missing_message,
    prepare_include_path,
    task_entries,
)

REMEDY = "pass eval_harness_tasks=() to default_train to train without in-training evals"


def missing_tasks_path(local_yaml: str) -> str:
    """Where the subprocess lists the tasks whose data is missing (next to its local YAML)."""
    return os.path.splitext(local_yaml)[0] + ".missing_tasks.json"


def read_missing_tasks(local_yaml: str) -> TaskDataMissing | None:
    """The error for the tasks listed at :func:`missing_tasks_path` (None: no such list)."""
    path = missing_tasks_path(local_yaml)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return TaskDataMissing(missing_message(json.load(handle), REMEDY))


def check_harness_tasks(tasks: Sequence[Any], local_yaml: str) -> tuple[Any, dict[str, str]]:
    """Build ``tasks`` offline -- fetching a task's missing data from the hub into the mirror when the
    step may reach the hub (:func:`~marin_assets.eval_data.task_data.hub_fetch_requested`); returns
    lm-eval's ``TaskManager`` that holds them and, per task whose data was fetched, the local folder
    it was built from. Otherwise writes the missing ones to :func:`missing_tasks_path` and raises
    ``TaskDataMissing``."""
    specs = task_entries(tasks)
    include = prepare_include_path(os.path.splitext(local_yaml)[0] + "_eval_tasks")
    manager, missing = check_tasks(specs, include, hub=hub_fetch_requested())
    if missing:
        with open(missing_tasks_path(local_yaml), "w") as handle:
            json.dump(missing, handle, indent=2)
        raise TaskDataMissing(missing_message(missing, REMEDY))
    return manager, {spec["task"]: spec["dataset_path"] for spec in specs if spec.get("dataset_path")}


def levanter_task_spec(tasks: Sequence[Any]) -> list[Any]:
    """Levanter's ``task_spec``: a ``TaskConfig`` per ``EvalTaskConfig`` (Marin's
    ``convert_to_levanter_task_config``), a plain name (task or group) as is."""
    from levanter.eval_harness import TaskConfig

    spec: list[Any] = []
    for task in tasks:
        entry = task_entries([task])[0]
        if isinstance(task, str):
            spec.append(entry["task"])
        else:
            spec.append(
                TaskConfig(task=entry["task"], num_fewshot=entry["num_fewshot"], task_alias=entry.get("task_alias"))
            )
    return spec


def harness_tasks_of(eval_harness: Any) -> list[Any]:
    """The tasks of a Levanter ``LmEvalHarnessConfig`` as names / dicts :func:`task_entries` reads."""
    out: list[Any] = []
    for task in eval_harness.task_spec:
        if isinstance(task, str):
            out.append(task)
        else:
            out.append({"task": task.task, "num_fewshot": task.num_fewshot, "task_alias": task.task_alias})
    return out


def _numeric_averages(outputs: Mapping[str, Any]) -> dict[str, float]:
    """Levanter's macro/micro averages over the numeric metrics only."""
    import numpy as np

    results, counts = outputs["results"], outputs.get("n-samples", {})
    keys = {
        k
        for r in results.values()
        for k, v in r.items()
        if "stderr" not in k and k != "alias" and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    averages: dict[str, float] = {}
    for metric in sorted(keys):
        rows = [
            (results[name][metric], counts[name]["effective"])
            for name in counts
            if isinstance(results.get(name, {}).get(metric), (int, float))
        ]
        if not rows:
            continue
        values, weights = zip(*rows, strict=True)
        averages["macro_avg_" + metric] = float(np.mean(values))
        if sum(weights) > 0:
            averages["micro_avg_" + metric] = float(np.average(values, weights=weights))
    return averages


def _legacy_task_dict(obj: Any) -> dict[Any, Any]:
    """lm-eval's older nested task dict (what Levanter walks) for a built ``Task`` or ``Group``."""
    from lm_eval.api.group import ConfigurableGroup, Group

    if isinstance(obj, Group):
        nested: dict[Any, Any] = {}
        for child in obj:
            nested.update(_legacy_task_dict(child) if isinstance(child, Group) else {child.task_name: child})
        return {ConfigurableGroup.from_group(obj): nested}
    return {obj.task_name: obj}


def use_local_tasks(manager: Any, dataset_paths: Mapping[str, str] | None = None) -> None:
    """Make Levanter's harness (in this process) load tasks from ``manager`` -- a task named in
    ``dataset_paths`` from the folder its data was fetched into -- and average numbers only."""
    fetched = dict(dataset_paths or {})
    import levanter.eval_harness
    import lm_eval.tasks
    from lm_eval.api.group import ConfigurableGroup
    from lm_eval.api.task import ConfigurableTask

    original_manager, original_get = lm_eval.tasks.TaskManager, lm_eval.tasks.get_task_dict

    def task_manager(*args: Any, **kwargs: Any) -> Any:
        # Levanter calls TaskManager() with no arguments: give it the index that passed the check.
        return manager if not args and not kwargs else original_manager(*args, **kwargs)

    def get_task_dict(task_list: Any, task_manager: Any = None) -> dict[Any, Any]:
        # Levanter passes {"task": name, "num_fewshot": n, "task_alias": a}; lm-eval 0.4.13 reads such a
        # dict as a whole inline task config (no dataset), so build the registered task with overrides.
        tasks_manager = task_manager or manager
        index = tasks_manager.task_index
        out: dict[Any, Any] = {}
        for spec in task_list if isinstance(task_list, list) else [task_list]:
            if isinstance(spec, str) and spec in fetched:
                spec = {"task": spec}
            if isinstance(spec, Mapping) and spec.get("task") in index:
                overrides = {k: v for k, v in spec.items() if k != "task" and v is not None}
                if spec["task"] in fetched:
                    overrides["dataset_path"] = fetched[spec["task"]]
                built = tasks_manager._factory.build(index[spec["task"]], overrides=overrides or None, registry=index)
                out.update(_legacy_task_dict(built))
            else:
                out.update(original_get([spec], tasks_manager))
        return out

    lm_eval.tasks.TaskManager = task_manager
    lm_eval.tasks.get_task_dict = get_task_dict
    # Levanter names these through ``lm_eval.tasks``, which lm-eval 0.4.13 no longer re-exports.
    lm_eval.tasks.ConfigurableGroup = ConfigurableGroup
    lm_eval.tasks.ConfigurableTask = ConfigurableTask
    levanter.eval_harness._compute_averages = _numeric_averages
