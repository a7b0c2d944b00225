"""The lm-eval subprocess: offline task check, then lm-eval's ``hf`` model on an HF export.

    python -m marin_assets.evaluation.lm_eval_main SPEC.json

``SPEC.json``: ``{"model_args", "tasks": [{"task", "num_fewshot", "task_alias"}], "include_path",
"batch_size", "limit", "output_dir", "apply_chat_template"}``. Runs with ``HF_DATASETS_OFFLINE=1``
and ``HF_HUB_OFFLINE=1``: every task is built first, on its own (with its few-shot count and alias; its
data loads then); a task whose data is neither in
the local Hugging Face cache nor given as a local task YAML is reported in
``<output_dir>/missing_tasks.json`` (task, dataset, cause) and the process exits with
:data:`MISSING_EXIT` before evaluating anything -- nothing is downloaded. Results go to
``<output_dir>/results.json`` in lm-eval's format.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MISSING_EXIT = 3


def _dataset_of(manager: Any, name: str) -> str | None:
    """``dataset_path[/dataset_name]`` of a registered task (from its YAML), when it names one."""
    try:
        import yaml

        entry = manager.task_index.get(name)
        path = getattr(entry, "yaml_path", None) or (entry.get("yaml_path") if isinstance(entry, dict) else None)
        with open(path) as handle:
            config = yaml.load(handle, Loader=yaml.BaseLoader) or {}  # no !function resolution needed
    except Exception:  # noqa: BLE001 -- only a hint for the error message
        return None
    dataset = config.get("dataset_path")
    return f"{dataset}/{config['dataset_name']}" if dataset and config.get("dataset_name") else dataset


def load_tasks(tasks: list[dict[str, Any]], manager: Any) -> tuple[list[Any], list[dict[str, Any]]]:
    """Build every task (its data loads here, offline) with its few-shot count and alias.

    Returns ``(task objects, missing)``; ``missing`` lists ``{"task", "dataset", "cause"}`` for each
    task that is unknown or whose data is not available offline. A task with an alias is registered
    under the alias, so one task can run twice (e.g. 0-shot and 10-shot).
    """
    built, missing = [], []
    index = manager.task_index
    for spec in tasks:
        name = spec["task"]
        if name not in index:
            missing.append(
                {"task": name, "dataset": None, "cause": "no such lm-eval task (not built in, not in include_path)"}
            )
            continue
        overrides: dict[str, Any] = {}
        if spec.get("num_fewshot") is not None:  # None: the task's own default, as lm-eval's CLI
            overrides["num_fewshot"] = spec["num_fewshot"]
        if spec.get("task_alias"):
            overrides.update(task=spec["task_alias"], task_alias=spec["task_alias"])
        try:
            built.append(manager._factory.build(index[name], overrides=overrides, registry=index))
        except Exception as exc:  # noqa: BLE001 -- datasets raises many types when offline
            missing.append(
                {"task": name, "dataset": _dataset_of(manager, name), "cause": f"{type(exc).__name__}: {exc}"}
            )
    return built, missing


def task_manager(include_path: str | None, names: list[str]) -> Any:
    """lm-eval's ``TaskManager`` over ``include_path``; lm-eval's built-in tasks are indexed too only
    when one of ``names`` is not defined there (indexing them costs tens of seconds)."""
    from lm_eval.tasks import TaskManager

    if include_path:
        local = TaskManager(include_path=include_path, include_defaults=False)
        if all(name in local.task_index for name in names):
            return local
    return TaskManager(include_path=include_path)


def main(argv: list[str] | None = None) -> int:
    """Check the tasks, evaluate, write results; returns the exit code."""
    (spec_path,) = sys.argv[1:] if argv is None else argv
    with open(spec_path) as handle:
        spec = json.load(handle)
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import lm_eval

    out = spec["output_dir"]
    os.makedirs(out, exist_ok=True)
    manager = task_manager(spec["include_path"], [task["task"] for task in spec["tasks"]])
    built, missing = load_tasks(spec["tasks"], manager)
    if missing:
        with open(os.path.join(out, "missing_tasks.json"), "w") as handle:
            json.dump(missing, handle, indent=2)
        for item in missing:
            print(f"lm-eval task {item['task']!r} is not available offline: {item['cause']}", file=sys.stderr)
        return MISSING_EXIT
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=spec["model_args"],
        tasks=built,
        batch_size=spec["batch_size"],
        device="cpu",
        limit=spec.get("limit"),
        task_manager=manager,
        log_samples=False,
        apply_chat_template=bool(spec.get("apply_chat_template")),
        random_seed=0,
    )
    if results is None:
        raise RuntimeError("lm-eval returned no results")
    results.pop("samples", None)
    tmp = os.path.join(out, "results.json.tmp")
    with open(tmp, "w") as handle:
        json.dump(results, handle, indent=2, default=str)
    os.replace(tmp, os.path.join(out, "results.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
