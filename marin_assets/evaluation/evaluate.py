"""The evaluation itself: Levanter perplexity / bits-per-byte plus lm-eval harness tasks.

:func:`run_evaluation` (what ``marin_assets.evaluation.run.evaluate`` runs for an
``EvaluationConfig``)

1. runs ``levanter.main.eval_lm`` on the HF export over the ``validation`` splits of the config's
   tokenized caches (held-out loss and bits per byte, Levanter's own evaluator), and
2. runs lm-eval's ``hf`` model on the same export (CPU torch) for the requested tasks, offline: a
   task whose data is neither in the local Hugging Face cache nor given as task YAML fails with an
   error naming it (:mod:`marin_assets.eval_data.lm_eval_main`). The repo ships small local tasks
   in ``eval_data/eval_tasks/`` (``marin_docstring_mc``, ``marin_docstring_cloze``, ``marin_docstring_ppl``).

Both run in subprocesses (JAX and torch stay out of the engine process), side by side: each spends
most of its time starting up single-threaded, so together they take about as long as the slower
one. The result is ``<out>/results.json`` in lm-eval's format -- ``{"results": {task: {metric:
value}}, ...}`` -- with the Levanter numbers added as ``levanter_validation/<set>`` tasks; the step
metadata has every metric as a flat float (``<task>/<metric>``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from marin_assets.download.huggingface import hub
from marin_assets.eval_data.lm_eval_main import MISSING_EXIT
from marin_assets.eval_data.task_data import TaskDataMissing, missing_message, prepare_include_path, task_entries
from marin_assets.evaluation.evaluation_config import EvaluationConfig
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.step import unwrap_versioned_value
from marin_assets.execution.storage import atomic_write_text, filesystem, is_local, join_path
from marin_assets.training import levanter_main, subprocess_runner
from marin_assets.training.training import training_env
from marin_assets.training.training_log import list_step_dirs, parse_metrics

logger = logging.getLogger(__name__)

LEVANTER_TASK_PREFIX = "levanter_validation"
LM_EVAL_MAX_LENGTH = 1024


def _exists(path: str) -> bool:
    fs, p = filesystem(path)
    return fs.exists(p)


def resolve_hf_export(model_path: str, discover_latest_checkpoint: bool = True) -> str:
    """The HF model folder of ``model_path`` (local or remote): itself when it holds a
    ``config.json``; else, when allowed, the newest ``step-N`` of it or of its ``hf/`` folder."""
    if _exists(join_path(model_path, "config.json")):
        return model_path
    if discover_latest_checkpoint:
        for folder in (model_path, join_path(model_path, "hf")):
            steps = list_step_dirs(folder)
            if steps:
                return steps[-1][1]
    raise FileNotFoundError(f"no HF export (config.json, or hf/step-N) under {model_path}")


def levanter_eval_caches(config: EvaluationConfig) -> dict[str, str]:
    """Validation set name -> cache root, for the caches that have a ``validation`` split (local or gs://)."""
    from marin_assets.processing.tokenize.tokenize import read_ledger
    from marin_assets.training.levanter_config import component_caches

    caches, _ = component_caches({k: unwrap_versioned_value(v) for k, v in config.validation_caches.items()}, {})
    return {k: v for k, v in caches.items() if read_ledger(join_path(v, "validation")) is not None}


def write_levanter_eval_config(config: EvaluationConfig, hf_dir: str, work: str) -> str:
    """Write Levanter's ``eval_lm`` config to ``<work>/levanter_eval.yaml`` (in the eval subprocess:
    it imports Levanter) and return its path. The model shape comes from the export's config.json."""
    import pathlib

    import jmp
    from levanter.compat.hf_checkpoints import RepoRef
    from levanter.data.text import LMMixtureDatasetConfig, UrlDatasetSourceConfig
    from levanter.distributed import RayConfig
    from levanter.main.eval_lm import EvalLmConfig
    from levanter.models.gpt2 import Gpt2Config
    from levanter.models.llama import LlamaConfig
    from levanter.tracker.json_logger import JsonLoggerConfig
    from levanter.trainer import TrainerConfig
    from transformers import AutoConfig

    from marin_assets.training.levanter_config import levanter_config_yaml, tokenizer_of_caches, use_local_reference

    caches = levanter_eval_caches(config)
    tokenizer = tokenizer_of_caches(caches)
    hf_config = AutoConfig.from_pretrained(hf_dir)
    model_classes = {"llama": LlamaConfig, "gpt2": Gpt2Config}
    if hf_config.model_type not in model_classes:
        raise ValueError(f"{hf_dir}: Levanter evaluation of model_type {hf_config.model_type!r} is not wired up")
    model = use_local_reference(model_classes[hf_config.model_type].from_hf_config(hf_config), hf_dir, tokenizer)
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
        model=model,
        trainer=TrainerConfig(
            mp=jmp.get_policy("p=f32,c=f32"),
            tracker=(JsonLoggerConfig(),),
            per_device_eval_parallelism=-1,
            train_batch_size=config.batch_size,
            max_eval_batches=unwrap_versioned_value(config.max_eval_batches),
            log_dir=pathlib.Path(os.path.join(work, "logs")),
            ray=RayConfig(auto_start_cluster=False),
            require_accelerator=False,
        ),
    )
    yaml_path = os.path.join(work, "levanter_eval.yaml")
    with open(yaml_path, "w") as handle:
        handle.write(levanter_config_yaml(lev))
    return yaml_path


def prepare_levanter_eval(payload: tuple[EvaluationConfig, str, str], local_yaml: str) -> str:
    """In the eval subprocess (``levanter_main eval``): write Levanter's ``eval_lm`` config; returns its path."""
    config, hf_dir, work = payload
    return write_levanter_eval_config(config, hf_dir, work)


def levanter_eval_job(config: EvaluationConfig, hf_dir: str, work: str) -> tuple[list[str], dict[str, str]] | None:
    """``(command, caches)`` of Levanter's evaluation (None: no cache has a validation split)."""
    caches = levanter_eval_caches(config)
    if not caches:
        return None
    spec = levanter_main.write_spec(
        os.path.join(work, "levanter_eval.pkl"),
        "marin_assets.evaluation.evaluate:prepare_levanter_eval",
        (config, hf_dir, work),
    )
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


def lm_eval_job(config: EvaluationConfig, hf_dir: str, work: str) -> tuple[list[str], dict[str, str], str]:
    """``(command, environment, output folder)`` of lm-eval's ``hf`` model on ``hf_dir``."""
    out_dir = os.path.join(work, "lm_eval")
    shutil.rmtree(out_dir, ignore_errors=True)
    max_length = config.max_length or LM_EVAL_MAX_LENGTH
    extra = _local_copy(config.include_path, os.path.join(work, "include_path")) if config.include_path else None
    spec = {
        # lm-eval asserts that a continuation fits in max_length, which it takes from the model's
        # (tiny) training context; RoPE models score longer inputs fine, so allow a longer window.
        "model_args": f"pretrained={hf_dir},dtype=float32,max_length={max_length}",
        "tasks": task_entries(config.evals),
        "include_path": prepare_include_path(os.path.join(work, "tasks"), extra),
        "batch_size": config.batch_size,
        "limit": unwrap_versioned_value(config.max_eval_instances),
        "output_dir": out_dir,
        "apply_chat_template": config.apply_chat_template,
        # Task data not on this machine may come from the hub (into the mirror) unless HF_HUB_OFFLINE=1.
        "hub": not hub.hub_offline(),
        "mirror": None if hub.hub_offline() else hub.mirror_root(),
    }
    spec_path = os.path.join(work, "lm_eval_spec.json")
    with open(spec_path, "w") as handle:
        json.dump(spec, handle)
    env = training_env()
    env.pop("JAX_PLATFORMS", None)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return [sys.executable, "-m", "marin_assets.eval_data.lm_eval_main", spec_path], env, out_dir


def _missing_tasks_error(out_dir: str) -> TaskDataMissing | None:
    path = os.path.join(out_dir, "missing_tasks.json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return TaskDataMissing(missing_message(json.load(handle)))


def run_both(
    jobs: Mapping[str, tuple[list[str], str, Mapping[str, str]]], timeout_s: float
) -> tuple[dict[str, str], dict[str, float], dict[str, int]]:
    """Run ``{name: (command, log path, env)}`` at the same time; return each log's text, seconds
    and exit code. The first failure kills the others."""
    start = time.monotonic()
    deadline = start + timeout_s
    procs = {
        name: (subprocess_runner.start(cmd, log, env, label=f"eval {name}"), cmd, log)
        for name, (cmd, log, env) in jobs.items()
    }
    texts: dict[str, str] = {}
    seconds: dict[str, float] = {}
    codes: dict[str, int] = {}
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
                codes[name] = proc.returncode
                with open(log, encoding="utf-8", errors="replace") as handle:
                    texts[name] = handle.read()
                if proc.returncode != 0:
                    return texts, seconds, codes
            if pending:
                time.sleep(0.2)
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                subprocess_runner.kill_group(proc)
                proc.wait()
            subprocess_runner.finish(proc)
    return texts, seconds, codes


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _local_copy(folder: str, dest: str, always_copy: bool = False) -> str:
    """``folder`` itself when local, else a copy of it (object store) under ``dest``: lm-eval's and
    Levanter's HF loaders read local folders (or hub ids), not ``gs://`` URLs."""
    if is_local(folder) and not always_copy:
        return folder
    shutil.rmtree(dest, ignore_errors=True)
    if is_local(folder):
        shutil.copytree(folder, dest)
        return dest
    fs, path = filesystem(folder)
    fs.get(path.rstrip("/") + "/", dest, recursive=True)
    return dest


def run_evaluation(config: EvaluationConfig) -> dict[str, Any]:
    """Run both evaluations and write ``results.json``; returns metadata (every metric a flat float)."""
    out = str(config.evaluation_path)
    if is_local(out):
        os.makedirs(out, exist_ok=True)
        return _evaluate_in(config, out, out)
    # A remote output is evaluated in a private local folder (lm-eval and Levanter's loaders write
    # local files); the logs are copied beside results.json whatever happens, then the folder goes.
    work = tempfile.mkdtemp(prefix="marin-eval-")
    try:
        return _evaluate_in(config, out, work)
    finally:
        _upload_logs(work, out)
        shutil.rmtree(work, ignore_errors=True)


EVAL_LOGS = ("lm_eval.log", "levanter_eval.log")


def _upload_logs(work: str, out: str) -> None:
    """Copy the evaluation logs of a local work folder into the (remote) output folder."""
    fs, _ = filesystem(out)
    for name in EVAL_LOGS:
        local = os.path.join(work, name)
        if os.path.exists(local):
            try:
                fs.put_file(local, join_path(out, name))
            except OSError as exc:  # the evaluation's own outcome matters more than its log's copy
                logger.warning("could not copy %s to %s: %s", local, join_path(out, name), exc)


def _evaluate_in(config: EvaluationConfig, out: str, work: str) -> dict[str, Any]:
    """``run_evaluation`` with its local files (HF export copy, logs, lm-eval output) in ``work``."""
    if config.model_path is None:
        raise ValueError("EvaluationConfig.model_path is required")
    hf_export = resolve_hf_export(str(config.model_path), config.discover_latest_checkpoint)
    hf_dir = _local_copy(hf_export, os.path.join(work, "hf_export"))
    start = time.monotonic()
    tasks = task_entries(config.evals)
    jobs: dict[str, tuple[list[str], str, Mapping[str, str]]] = {}
    lm_eval_out = None
    if tasks:
        cmd, env, lm_eval_out = lm_eval_job(config, hf_dir, work)
        jobs["lm_eval"] = (cmd, os.path.join(work, "lm_eval.log"), env)
    levanter_job = levanter_eval_job(config, hf_dir, work) if config.validation_caches else None
    if levanter_job is not None:
        jobs["levanter"] = (levanter_job[0], os.path.join(work, "levanter_eval.log"), training_env())
    if not jobs:
        raise ValueError("nothing to evaluate: no lm-eval tasks and no validation cache with a validation split")
    texts, seconds, codes = run_both(jobs, config.timeout_s)
    if codes.get("lm_eval") == MISSING_EXIT and lm_eval_out is not None:
        missing = _missing_tasks_error(lm_eval_out)
        if missing is not None:
            raise missing
    for name, code in codes.items():
        if code != 0:
            log = jobs[name][1] if work == out else join_path(out, os.path.basename(jobs[name][1]))
            raise RuntimeError(f"{name} evaluation exited with {code}; log {log}:\n{texts[name][-4000:]}")
    if levanter_job is not None:  # the subprocess's pickled input only; levanter_eval.yaml records what ran
        with contextlib.suppress(OSError):
            os.remove(os.path.join(work, "levanter_eval.pkl"))
    results: dict[str, Any] = {"results": {}, "versions": {}, "n-shot": {}, "configs": {}, "config": {}}
    if lm_eval_out is not None:
        with open(os.path.join(lm_eval_out, "results.json")) as handle:
            results = json.load(handle)
    levanter = parse_levanter_eval(texts["levanter"], levanter_job[1]) if levanter_job is not None else {}
    for name, metrics in levanter.items():
        task = f"{LEVANTER_TASK_PREFIX}/{name}"
        results.setdefault("results", {})[task] = {"alias": task, **{f"{k},none": v for k, v in metrics.items()}}
        results.setdefault("versions", {})[task] = "levanter"
    results.setdefault("config", {}).update({"marin_hf_export": hf_export, "marin_model_path": str(config.model_path)})
    atomic_write_text(join_path(out, "results.json"), json.dumps(results, indent=2, default=str))
    done = results.get("results", {})
    missing = [t["task"] for t in tasks if t["task"] not in done and t.get("task_alias") not in done]
    if missing:
        raise RuntimeError(f"lm-eval produced no results for {missing}")
    rows = []
    flat: dict[str, float] = {}
    for task, metrics in sorted(results.get("results", {}).items()):
        for key, value in sorted(metrics.items()):
            if key == "alias" or not _finite(value):
                continue
            metric = key.split(",")[0]
            flat[f"{task}/{metric}"] = float(value)
            if "stderr" not in key:
                rows.append({"task": task, "metric": metric, "value": round(float(value), 4)})
    return {
        **flat,
        "metrics": table_markdown(rows),
        "tasks": sorted(results.get("results", {})),
        "bpb": {name: metrics.get("bpb") for name, metrics in levanter.items()},  # per set (also flat above)
        "hf_export": hf_export,
        "lm_eval_s": seconds.get("lm_eval", 0.0),
        "levanter_eval_s": seconds.get("levanter", 0.0),
        "wall_s": round(time.monotonic() - start, 1),
        "results_path": join_path(out, "results.json"),
    }
