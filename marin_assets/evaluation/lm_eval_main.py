"""The lm-eval subprocess: offline task check, then lm-eval's ``hf`` model on an HF export.

    python -m marin_assets.evaluation.lm_eval_main SPEC.json

``SPEC.json``: ``{"model_args", "tasks": [{"task", "num_fewshot", "task_alias"}], "include_path",
"batch_size", "limit", "output_dir", "apply_chat_template"}``. Runs with ``HF_DATASETS_OFFLINE=1``
and ``HF_HUB_OFFLINE=1``: every task is loaded first, on its own; a task whose data is neither in
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
    """``dataset_path[/dataset_name]`` from the task's YAML, when lm-eval knows the task."""
    try:
        from lm_eval.utils import load_yaml_config

        entry = manager.task_index.get(name) or {}
        config = load_yaml_config(entry["yaml_path"]) if entry.get("yaml_path") else {}
    except Exception:  # noqa: BLE001 -- only a hint for the error message
        return None
    path = config.get("dataset_path")
    return f"{path}/{config['dataset_name']}" if path and config.get("dataset_name") else path


def check_tasks(tasks: list[dict[str, Any]], manager: Any) -> list[dict[str, Any]]:
    """The tasks that cannot load offline: ``[{"task", "dataset", "cause"}]``."""
    from lm_eval.tasks import get_task_dict

    missing = []
    for spec in tasks:
        name = spec["task"]
        if name not in manager.all_tasks:
            missing.append(
                {"task": name, "dataset": None, "cause": "no such lm-eval task (not built in, not in include_path)"}
            )
            continue
        try:
            get_task_dict([spec], manager)
        except Exception as exc:  # noqa: BLE001 -- datasets raises many types when offline
            missing.append(
                {"task": name, "dataset": _dataset_of(manager, name), "cause": f"{type(exc).__name__}: {exc}"}
            )
    return missing


def main(argv: list[str] | None = None) -> int:
    """Check the tasks, evaluate, write results; returns the exit code."""
    (spec_path,) = sys.argv[1:] if argv is None else argv
    with open(spec_path) as handle:
        spec = json.load(handle)
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = spec["output_dir"]
    os.makedirs(out, exist_ok=True)
    manager = TaskManager(include_path=spec["include_path"])
    missing = check_tasks(spec["tasks"], manager)
    if missing:
        with open(os.path.join(out, "missing_tasks.json"), "w") as handle:
            json.dump(missing, handle, indent=2)
        for item in missing:
            print(f"lm-eval task {item['task']!r} is not available offline: {item['cause']}", file=sys.stderr)
        return MISSING_EXIT
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=spec["model_args"],
        tasks=spec["tasks"],
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
