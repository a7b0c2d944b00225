"""The lm-eval subprocess: offline task check, then lm-eval's ``hf`` model on an HF export.

    python -m marin_assets.eval_data.lm_eval_main SPEC.json

``SPEC.json``: ``{"model_args", "tasks": [{"task", "num_fewshot", "task_alias"}], "include_path",
"batch_size", "limit", "output_dir", "apply_chat_template", "hub", "mirror"}``. Every task is built first,
on its own (with its few-shot count and alias; its data loads then), with ``HF_DATASETS_OFFLINE=1``. A
task whose data is neither in the local Hugging Face cache nor given as a local task YAML is fetched
from the hub when ``spec["hub"]`` (the step was not run with ``HF_HUB_OFFLINE=1``): its dataset
repository goes into the hub mirror (``spec["mirror"]``, :mod:`marin_assets.download.huggingface.hub`)
and the task is built again from that folder -- a later run reads it from the mirror without the hub.
A task that still cannot be built -- unknown, data unavailable, or an optional Python package its code
imports is missing (the cause then names the package: ``pip install wonderwords``) -- is reported in
``<output_dir>/missing_tasks.json`` (task, dataset, cause, package) and the process exits with
:data:`MISSING_EXIT` before evaluating anything. Results go to ``<output_dir>/results.json`` in
lm-eval's format.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

MISSING_EXIT = 3

# Import names whose pip package is named differently (the rest install under their import name).
PIP_NAMES = {
    "sklearn": "scikit-learn",
    "rouge_score": "rouge-score",
    "Levenshtein": "levenshtein",
    "yaml": "pyyaml",
    "sentencepiece": "sentencepiece",
    "bs4": "beautifulsoup4",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "Bio": "biopython",
    "fuzzywuzzy": "fuzzywuzzy",
    "sqlitedict": "sqlitedict",
    "evaluate": "evaluate",
    "jieba": "jieba",
    "zhon": "zhon",
}
# Dataset builder names lm-eval tasks use for local files (not hub repositories).
_BUILDERS = {"json", "csv", "parquet", "text", "arrow", "webdataset", "pandas", "imagefolder", "audiofolder"}


def missing_package(exc: BaseException) -> str | None:
    """The pip package to install when ``exc`` (or what caused it) is a missing import, else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ModuleNotFoundError) and current.name:
            top = current.name.split(".")[0]
            return PIP_NAMES.get(top, top)
        current = current.__cause__ or current.__context__
    return None


def _task_yaml(manager: Any, name: str) -> dict[str, Any]:
    """The task's YAML (with its ``include`` s, functions unresolved), or {}."""
    entry = manager.task_index.get(name)
    path = getattr(entry, "yaml_path", None) or (entry.get("yaml_path") if isinstance(entry, dict) else None)
    if not path:
        return {}
    from lm_eval.tasks._yaml_loader import load_yaml

    try:
        return load_yaml(path, resolve_func=False)
    except (OSError, ValueError) as exc:  # only a hint for the error message and the hub fetch
        print(f"cannot read the YAML of task {name!r} ({path}): {exc}", file=sys.stderr)
        return {}


def _dataset_of(manager: Any, name: str) -> str | None:
    """``dataset_path[/dataset_name]`` of a registered task (from its YAML), when it names one."""
    config = _task_yaml(manager, name)
    dataset = config.get("dataset_path")
    return f"{dataset}/{config['dataset_name']}" if dataset and config.get("dataset_name") else dataset


def _hub_dataset(manager: Any, name: str) -> str | None:
    """The hub repository the task's data comes from (``dataset_path``), when it is one."""
    dataset = _task_yaml(manager, name).get("dataset_path")
    if not isinstance(dataset, str) or dataset in _BUILDERS or os.path.exists(dataset) or "://" in dataset:
        return None
    return dataset


def _fetch_from_hub(dataset: str) -> str:
    """A local folder holding the hub dataset ``dataset`` (the mirror's copy, fetched if needed)."""
    from marin_assets.download.huggingface import hub
    from marin_assets.download.huggingface.hub_names import local_folder

    with hub.online():  # only the fetch: the model and tokenizer load offline
        folder = hub.hub_snapshot(dataset, "dataset", "main", None, what=f"lm-eval dataset {dataset!r}")
    return local_folder(folder)


def _build(manager: Any, name: str, overrides: dict[str, Any]) -> Any:
    return manager._factory.build(manager.task_index[name], overrides=overrides, registry=manager.task_index)


def load_tasks(tasks: list[dict[str, Any]], manager: Any, hub: bool = False) -> tuple[list[Any], list[dict[str, Any]]]:
    """Build every task (its data loads here) with its few-shot count and alias.

    Returns ``(task objects, missing)``; ``missing`` lists ``{"task", "dataset", "cause"}`` (and
    ``"package"`` for a missing import) for each task that cannot be built. With ``hub``, a task whose
    data is not local is fetched from the hub first (see the module docstring); a spec may carry the
    folder already fetched (``"dataset_path"``). A task with an alias is registered under the alias,
    so one task can run twice (e.g. 0-shot and 10-shot).
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
        if spec.get("dataset_path"):
            overrides["dataset_path"] = spec["dataset_path"]
        try:
            built.append(_build(manager, name, overrides))
            continue
        except Exception as exc:  # noqa: BLE001 -- datasets raises many types when data is missing
            error: BaseException = exc
        package = missing_package(error)
        dataset = _hub_dataset(manager, name)
        if package is None and hub and dataset is not None and "dataset_path" not in overrides:
            try:
                folder = _fetch_from_hub(dataset)
                built.append(_build(manager, name, {**overrides, "dataset_path": folder}))
                spec["dataset_path"] = folder
                continue
            except Exception as exc:  # noqa: BLE001 -- reported as the task's cause below
                error = exc
                package = missing_package(exc)
        item = {"task": name, "dataset": _dataset_of(manager, name), "cause": f"{type(error).__name__}: {error}"}
        if package is not None:
            item["package"] = package
        missing.append(item)
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
    # Offline throughout; with spec["hub"], only the fetch of missing task data goes online (hub.online).
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ["HF_HUB_OFFLINE"] = "1"
    if spec.get("mirror"):
        os.environ["MARIN_HF_MIRROR"] = spec["mirror"]
    import lm_eval

    out = spec["output_dir"]
    os.makedirs(out, exist_ok=True)
    manager = task_manager(spec["include_path"], [task["task"] for task in spec["tasks"]])
    built, missing = load_tasks(spec["tasks"], manager, hub=bool(spec.get("hub")))
    if missing:
        with open(os.path.join(out, "missing_tasks.json"), "w") as handle:
            json.dump(missing, handle, indent=2)
        for item in missing:
            print(f"lm-eval task {item['task']!r} cannot be built: {item['cause']}", file=sys.stderr)
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
