"""Evaluation as a step: Levanter perplexity / bits-per-byte plus lm-eval harness tasks.

``default_eval(train_step)`` returns a step ``evaluation/<name>`` that

1. runs ``levanter.main.eval_lm`` on the training run's HF export over the validation splits of
   the tokenized caches (held-out loss and bits per byte, Levanter's own evaluator), and
2. runs lm-eval's ``hf`` model on the same export (CPU torch) for the requested tasks. The repo
   ships small local tasks in ``eval_tasks/`` (``marin_docstring_mc``, ``marin_docstring_cloze``,
   ``marin_docstring_ppl``); any other task name is passed to lm-eval as is (its data must then be
   available offline).

Both run in subprocesses (JAX and torch stay out of the engine process), side by side: each spends
most of its time starting up single-threaded, so together they take about as long as the slower one.
The result is
``<out>/results.json`` in lm-eval's format -- ``{"results": {task: {metric: value}}, ...}`` -- with the
Levanter numbers added as ``levanter_validation/<set>`` tasks.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.step import ExecutorStep, InputName, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text, is_local, join_path
from marin_assets.training import levanter_main, subprocess_runner
from marin_assets.training.levanter_config import (
    _component_caches,
    _tokenizer_of,
    levanter_config_yaml,
    levanter_llama_config,
)
from marin_assets.training.levanter_train import training_env
from marin_assets.training.train_config import TINY_LLAMA, LlamaModelConfig
from marin_assets.training.training_log import list_step_dirs, parse_metrics

logger = logging.getLogger(__name__)

EVAL_TASKS_DIR = os.path.join(os.path.dirname(__file__), "eval_tasks")
LOCAL_TASKS = ("marin_docstring_mc", "marin_docstring_cloze", "marin_docstring_ppl")
LEVANTER_TASK_PREFIX = "levanter_validation"


@dataclass(frozen=True)
class EvalConfig:
    """Config of :func:`run_evaluation`.

    Attributes:
        output_path: the step output (``results.json`` and logs).
        checkpoint: a training step output (its last ``hf/step-N`` is used) or an HF model folder.
        validation_caches: name -> tokenized cache root(s) whose ``validation`` split is scored by
            Levanter (empty: skip Levanter's evaluation).
        tasks: lm-eval task names (empty: skip lm-eval).
        max_eval_instances: lm-eval ``--limit`` per task (None: all).
        max_eval_batches: Levanter eval batches per validation set (None: all).
        model: model shape (Levanter needs it to load the HF export).
        include_path: extra lm-eval task folder (the shipped ``eval_tasks`` is always included).
        batch_size: eval batch size for both.
        timeout_s: per subprocess.
    """

    output_path: str
    checkpoint: str
    validation_caches: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    tasks: tuple[str, ...] = LOCAL_TASKS
    max_eval_instances: int | None = None
    max_eval_batches: int | None = None
    model: LlamaModelConfig = TINY_LLAMA
    include_path: str | None = None
    batch_size: int = 16
    timeout_s: float = 3600.0


def resolve_hf_export(checkpoint: str) -> str:
    """The HF model folder of ``checkpoint``: itself if it has a config.json, else its last hf/step-N."""
    if os.path.exists(os.path.join(checkpoint, "config.json")) and os.path.exists(
        os.path.join(checkpoint, "model.safetensors")
    ):
        return checkpoint
    steps = list_step_dirs(join_path(checkpoint, "hf"))
    if not steps:
        raise FileNotFoundError(f"no HF export under {checkpoint}/hf")
    return steps[-1][1]


def prepare_include_path(dest: str, extra: str | None = None) -> str:
    """Copy the shipped task YAMLs to ``dest`` with ``data_files`` made absolute.

    lm-eval resolves relative ``data_files`` against the working directory, not the YAML's folder.
    """
    import yaml

    os.makedirs(dest, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(EVAL_TASKS_DIR, "*.yaml"))):
        with open(path) as handle:
            task = yaml.safe_load(handle)
        files = task.get("dataset_kwargs", {}).get("data_files", {})
        for split, name in list(files.items()):
            files[split] = os.path.join(EVAL_TASKS_DIR, name)
        with open(os.path.join(dest, os.path.basename(path)), "w") as handle:
            yaml.safe_dump(task, handle, sort_keys=False)
    if extra:
        shutil.copytree(extra, os.path.join(dest, "extra"), dirs_exist_ok=True)
    return dest


def levanter_eval_caches(config: EvalConfig) -> dict[str, str]:
    """Validation set name -> cache root of the caches that have a ``validation`` split."""
    caches, _ = _component_caches(config.validation_caches, {})
    return {k: v for k, v in caches.items() if os.path.exists(os.path.join(v, "validation", "shard_ledger.json"))}


def write_levanter_eval_config(config: EvalConfig, hf_dir: str, work: str) -> str:
    """Write Levanter's ``eval_lm`` config to ``<work>/levanter_eval.yaml`` (in the eval subprocess:
    it imports Levanter) and return its path."""
    import jmp
    from haliax.partitioning import ResourceAxis  # noqa: F401 -- imported for Levanter's side effects
    from levanter.compat.hf_checkpoints import RepoRef
    from levanter.data.text import LMMixtureDatasetConfig, UrlDatasetSourceConfig
    from levanter.distributed import RayConfig
    from levanter.main.eval_lm import EvalLmConfig
    from levanter.tracker.json_logger import JsonLoggerConfig
    from levanter.trainer import TrainerConfig

    caches = levanter_eval_caches(config)
    tokenizer = _tokenizer_of(caches)
    m = config.model
    lev = EvalLmConfig(
        hf_checkpoint=RepoRef(hf_dir),
        data=LMMixtureDatasetConfig(
            tokenizer=tokenizer,
            cache_dir=None,
            configs={
                k: UrlDatasetSourceConfig(cache_dir=v, train_urls=[], validation_urls=[]) for k, v in caches.items()
            },
            train_weights={},
        ),
        model=levanter_llama_config(m, hf_dir, tokenizer),
        trainer=TrainerConfig(
            mp=jmp.get_policy("p=f32,c=f32"),
            tracker=(JsonLoggerConfig(),),
            per_device_eval_parallelism=-1,
            train_batch_size=config.batch_size,
            max_eval_batches=config.max_eval_batches,
            log_dir=__import__("pathlib").Path(os.path.join(work, "logs")),
            ray=RayConfig(auto_start_cluster=False),
            require_accelerator=False,
        ),
    )
    yaml_path = os.path.join(work, "levanter_eval.yaml")
    with open(yaml_path, "w") as handle:
        handle.write(levanter_config_yaml(lev))
    return yaml_path


def levanter_eval_job(config: EvalConfig, hf_dir: str, work: str) -> tuple[list[str], dict[str, str]] | None:
    """``(command, caches)`` of Levanter's evaluation (None: no cache has a validation split)."""
    caches = levanter_eval_caches(config)
    if not caches:
        return None
    spec = levanter_main.write_spec(os.path.join(work, "levanter_eval.pkl"), (config, hf_dir, work))
    return levanter_main.command("eval", spec), caches


def parse_levanter_eval(text: str, caches: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """``{set: {"loss", "bpb", ...}}`` from ``eval_lm``'s JSON tracker log."""
    steps, _ = parse_metrics(text)
    metrics = steps.get(0, {})
    out: dict[str, dict[str, float]] = {}
    for name in caches:
        entry = {}
        for key in ("loss", "bpb", "macro_loss", "macro_bpb"):
            if f"eval/{name}/{key}" in metrics:
                entry[key] = float(metrics[f"eval/{name}/{key}"])
        if entry:
            out[name] = entry
    if len(caches) == 1 and not out:
        name = next(iter(caches))
        out[name] = {k: float(metrics[f"eval/{k}"]) for k in ("loss", "bpb") if f"eval/{k}" in metrics}
    return out


LM_EVAL_MAX_LENGTH = 1024


def lm_eval_job(config: EvalConfig, hf_dir: str, work: str) -> tuple[list[str], dict[str, str], str]:
    """``(command, environment, output folder)`` of lm-eval's ``hf`` model on ``hf_dir`` for ``config.tasks``."""
    include = prepare_include_path(os.path.join(work, "tasks"), config.include_path)
    out_dir = os.path.join(work, "lm_eval")
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        # lm-eval asserts that a continuation fits in max_length, which it takes from the model's
        # (tiny) training context; RoPE models score longer inputs fine, so allow a longer window.
        f"pretrained={hf_dir},dtype=float32,max_length={LM_EVAL_MAX_LENGTH}",
        "--tasks",
        ",".join(config.tasks),
        "--include_path",
        include,
        "--device",
        "cpu",
        "--batch_size",
        str(config.batch_size),
        "--output_path",
        out_dir,
        "--seed",
        "0",
    ]
    if config.max_eval_instances is not None:
        cmd += ["--limit", str(config.max_eval_instances)]
    env = training_env()
    env.pop("JAX_PLATFORMS", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return cmd, env, out_dir


def read_lm_eval_results(out_dir: str) -> dict[str, Any]:
    """The newest ``results_*.json`` lm-eval wrote under ``out_dir``."""
    found = sorted(glob.glob(os.path.join(out_dir, "**", "results_*.json"), recursive=True), key=os.path.getmtime)
    if not found:
        raise RuntimeError(f"lm-eval wrote no results under {out_dir}")
    with open(found[-1]) as handle:
        return json.load(handle)


def run_both(
    jobs: Mapping[str, tuple[list[str], str, Mapping[str, str]]], timeout_s: float
) -> tuple[dict[str, str], dict[str, float]]:
    """Run ``{name: (command, log path, env)}`` at the same time; return each log's text and seconds.

    Both evaluators spend most of their wall time starting up (importing torch or JAX, loading the
    model, compiling), single-threaded, so on a small machine running them side by side takes
    about as long as the slower one. The first failure kills the others and raises RuntimeError.
    """
    start = time.monotonic()
    deadline = start + timeout_s
    procs = {name: (subprocess_runner.start(cmd, log, env), cmd, log) for name, (cmd, log, env) in jobs.items()}
    texts: dict[str, str] = {}
    seconds: dict[str, float] = {}
    try:
        pending = dict(procs)
        while pending:
            for name, (proc, cmd, log) in list(pending.items()):
                if proc.poll() is None:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{' '.join(cmd[:4])} did not finish in {timeout_s}s; log {log}")
                    continue
                del pending[name]
                seconds[name] = round(time.monotonic() - start, 1)
                with open(log, encoding="utf-8", errors="replace") as handle:
                    texts[name] = handle.read()
                if proc.returncode != 0:
                    raise RuntimeError(
                        f"{' '.join(cmd[:4])} exited with {proc.returncode}; log {log}:\n{texts[name][-4000:]}"
                    )
            if pending:
                time.sleep(0.2)
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                subprocess_runner.kill_group(proc)
                proc.wait()
            getattr(proc, "unregister_fence", lambda: None)()
    return texts, seconds


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _local_copy(folder: str, dest: str) -> str:
    """``folder`` itself when local, else a copy of it (object store) under ``dest``: lm-eval's and
    Levanter's HF loaders read local folders (or hub ids), not ``gs://`` URLs."""
    if is_local(folder):
        return folder
    import fsspec

    fs, path = fsspec.core.url_to_fs(folder)
    shutil.rmtree(dest, ignore_errors=True)
    fs.get(path.rstrip("/") + "/", dest, recursive=True)
    return dest


def run_evaluation(config: EvalConfig) -> dict:
    """Run both evaluations and write ``results.json``; returns metadata (task -> metric table)."""
    out = config.output_path
    work = out if is_local(out) else os.path.join("/tmp", "marin-eval", os.path.basename(out.rstrip("/")))
    os.makedirs(work, exist_ok=True)
    hf_export = resolve_hf_export(config.checkpoint)
    hf_dir = _local_copy(hf_export, os.path.join(work, "hf_export"))
    start = time.monotonic()
    results: dict[str, Any] = {"results": {}, "versions": {}, "n-shot": {}, "configs": {}, "config": {}}
    jobs: dict[str, tuple[list[str], str, Mapping[str, str]]] = {}
    if config.tasks:
        cmd, env, lm_eval_out = lm_eval_job(config, hf_dir, work)
        jobs["lm_eval"] = (cmd, os.path.join(work, "lm_eval.log"), env)
    levanter_job = levanter_eval_job(config, hf_dir, work) if config.validation_caches else None
    if levanter_job is not None:
        jobs["levanter"] = (levanter_job[0], os.path.join(work, "levanter_eval.log"), training_env())
    texts, seconds = run_both(jobs, config.timeout_s)
    if config.tasks:
        results = read_lm_eval_results(lm_eval_out)
        results.pop("samples", None)
    levanter = parse_levanter_eval(texts["levanter"], levanter_job[1]) if levanter_job is not None else {}
    for name, metrics in levanter.items():
        task = f"{LEVANTER_TASK_PREFIX}/{name}"
        results.setdefault("results", {})[task] = {"alias": task, **{f"{k},none": v for k, v in metrics.items()}}
        results.setdefault("versions", {})[task] = "levanter"
    results.setdefault("config", {}).update({"marin_hf_export": hf_export, "marin_checkpoint": config.checkpoint})
    text = json.dumps(results, indent=2, default=str)
    atomic_write_text(join_path(out, "results.json"), text)
    rows = []
    for task, metrics in sorted(results.get("results", {}).items()):
        for key, value in sorted(metrics.items()):
            if key == "alias" or "stderr" in key or not _finite(value):
                continue
            rows.append({"task": task, "metric": key.split(",")[0], "value": round(float(value), 4)})
    missing = [t for t in config.tasks if t not in results.get("results", {})]
    if missing:
        raise RuntimeError(f"lm-eval produced no results for {missing}")
    bpb = {name: m.get("bpb") for name, m in levanter.items()}
    return {
        "metrics": table_markdown(rows),
        "tasks": sorted(results.get("results", {})),
        "bpb": bpb,
        "hf_export": hf_dir,
        "lm_eval_s": seconds.get("lm_eval", 0.0),
        "levanter_eval_s": seconds.get("levanter", 0.0),
        "wall_s": round(time.monotonic() - start, 1),
        "results_path": join_path(out, "results.json"),
    }


def default_eval(
    step: ExecutorStep | InputName | str,
    evals: Sequence[str] = LOCAL_TASKS,
    max_eval_instances: int | None = None,
    validation_caches: Mapping[str, Any] | None = None,
    name: str | None = None,
    max_eval_batches: int | None = None,
    model_config: LlamaModelConfig | None = None,
) -> ExecutorStep:
    """A step ``evaluation/<name>`` evaluating a training step (or an HF model folder).

    Args:
        step: a ``default_train`` step, an ``InputName`` to a checkpoint, or a path to an HF folder.
        evals: lm-eval task names (the shipped local tasks by default; any name is passed through).
        max_eval_instances: lm-eval ``--limit`` per task (versioned).
        validation_caches: name -> tokenized step/path scored by Levanter; by default the training
            step's own components (their ``validation`` splits).
        name: step name suffix (default: the training step's name without ``checkpoints/``).
        model_config: model shape, needed when ``step`` is not a training step.
    """
    if isinstance(step, ExecutorStep):
        default_name = step.name.split("/", 1)[-1]
        if validation_caches is None and hasattr(step.config, "components"):
            validation_caches = dict(step.config.components)
        model = model_config or getattr(step.config, "model", TINY_LLAMA)
        model = getattr(model, "value", model)  # unwrap versioned()
        checkpoint: Any = step
    else:
        default_name = os.path.basename(str(getattr(step, "name", step)).rstrip("/")) or "model"
        model = model_config or TINY_LLAMA
        checkpoint = InputName.hardcoded(step) if isinstance(step, str) else step
    vc = {k: (InputName.hardcoded(v) if isinstance(v, str) else v) for k, v in (validation_caches or {}).items()}
    return ExecutorStep(
        name=f"evaluation/{name or default_name}",
        fn=run_evaluation,
        config=EvalConfig(
            output_path=this_output_path(),
            checkpoint=checkpoint,
            validation_caches=vc,
            tasks=versioned(tuple(evals)),
            max_eval_instances=versioned(max_eval_instances),
            max_eval_batches=versioned(max_eval_batches),
            model=model,
        ),
        description=f"Levanter bits-per-byte on validation caches and lm-eval tasks {', '.join(evals)}.",
        pip_dependency_groups=["eval"],
    )
