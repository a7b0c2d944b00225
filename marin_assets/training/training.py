"""Marin's ``marin.training.training``: ``TrainLmOnPodConfig`` and ``run_levanter_train_lm``.

``TrainLmOnPodConfig.train_config`` is either

* a real Levanter ``TrainLmConfig`` (what Marin's integration test builds by hand:
  ``TrainLmConfig(data=lm_data_config(step), model=Gpt2Config(...), trainer=TrainerConfig(...))``), or
* an :class:`LmTrainSpec`, the nested config ``default_train`` builds from a ``SimpleTrainConfig``
  without importing Levanter. Its layout is Levanter's (``data``, ``trainer``, ``model``,
  ``optimizer`` ...), so the version keys of what a script versions are the ones Marin records
  (``train_config.model``, ``train_config.data.configs.<name>.cache_dir`` ...).

Either way Levanter's ``TrainLmConfig`` is built once, by
:func:`marin_assets.training.levanter_config.build_levanter_config`, inside the training subprocess
(:mod:`marin_assets.training.levanter_main`): JAX's imports, memory and threads stay out of the
engine/Dagster process, "kill the worker" is a SIGKILL of one process group, and the step reads
throughput and loss from Levanter's own JSON tracker log afterwards.

Output layout::

    <out>/train_config.yaml        the exact Levanter config that ran
    <out>/checkpoints/step-N/      Levanter checkpoints (resume point)
    <out>/hf/step-N/               HF (safetensors) export, loadable by transformers / lm-eval
    <out>/train.log                Levanter's log, every attempt's (json_logger metric records are lines in it)
    <out>/metrics.jsonl            the metric records alone (step, metrics)
    <out>/loss_curve.png           train/eval loss per step
    <out>/train_summary.json       what the step returns as metadata
    <out>/hosts/<i>/               host i's train.log, metrics.jsonl, train_summary.json (multi-host
                                   slices: host 0 alone writes the run's files, see ``hosts.py``)

Resume: the run id is derived from the output path and the checkpointer writes to a fixed folder,
so a rerun of a killed step finds ``checkpoints/step-N`` and Levanter continues from the newest
complete one (the engine adopts only checkpoints with Levanter's ``metadata.json``:
:mod:`marin_assets.execution.attempt`). ``resumed_from_step`` is the checkpoint Levanter reports
loading to resume, and ``train.log`` / ``metrics.jsonl`` hold the history of every attempt.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marin_assets.download.huggingface import hub
from marin_assets.eval_data.task_data import HUB_FETCH_ENV
from marin_assets.execution.metadata import markdown, table
from marin_assets.execution.step import unwrap_versioned_value
from marin_assets.execution.storage import atomic_write_bytes, atomic_write_text, join_path
from marin_assets.training import eval_harness, levanter_main, subprocess_runner
from marin_assets.training.device_defaults import defaults_for, progress_timeout_s, xla_flags_env
from marin_assets.training.hosts import host_folder, host_index
from marin_assets.training.train_config import (
    DEFAULT_CHECKPOINTS_PATH,
    DEFAULT_HF_CHECKPOINTS_PATH,
    LmTrainSpec,
    MixtureSpec,
    OptimizerSpec,
    SourceSpec,
    TrainerSpec,
    accelerator_of,
    use_wandb,
)
from marin_assets.training.training_log import (
    START_MARK,
    AttemptLog,
    list_step_dirs,
    loss_curve_png,
    metrics_jsonl,
    parse_metrics,
    resumed_from_step,
)

if TYPE_CHECKING:  # Levanter's config, for readers and type checkers only (no import at run time)
    from levanter.main.train_lm import TrainLmConfig

    from marin_assets.execution.step import StepPath, StepResources

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_CHECKPOINTS_PATH",
    "DEFAULT_HF_CHECKPOINTS_PATH",
    "LmTrainSpec",
    "MixtureSpec",
    "OptimizerSpec",
    "SourceSpec",
    "TrainLmOnPodConfig",
    "TrainerSpec",
    "accelerator_of",
    "run_levanter_train_lm",
    "training_env",
    "training_process_env",
]

TERM_GRACE_S = 120.0
"""A cancelled training process gets this long after SIGTERM to checkpoint its last step."""


# ----------------------------------------------------------------------------------------------
# Marin's config and step function
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainLmOnPodConfig:
    """A training run and where it runs (Marin's fields).

    Attributes:
        train_config: a Levanter ``TrainLmConfig`` or an :class:`LmTrainSpec`.
        resources: where it runs (``ResourceConfig.with_cpu()``, ``CpuOnlyConfig``, GPU/TPU configs).
        output_path: the step output: checkpoints go to ``<out>/checkpoints``, HF exports to ``<out>/hf``.
        impute_run_id_from_output_path: derive a stable run id from ``output_path`` (resume on rerun).
        env_vars: environment of the training process (on top of the resources' ``runtime_env``).
        auto_build_caches: Marin's flag; caches here are built by tokenize steps, so only False applies.
        progress_timeout_s: stop the run when its log shows nothing new for this long (None: two
            hours; 0: never); ``$MARIN_TRAIN_PROGRESS_TIMEOUT_S`` overrides it. There is no
            wall-clock limit: a run that progresses runs for days.
    """

    train_config: TrainLmConfig | LmTrainSpec
    resources: StepResources | None = None
    output_path: StepPath | None = None
    impute_run_id_from_output_path: bool = True
    env_vars: dict[str, str] | None = None
    auto_build_caches: bool = False
    progress_timeout_s: float | None = None


def training_env(extra: Mapping[str, str] | None = None, accelerator: str = "cpu") -> dict[str, str]:
    """Environment for a Levanter subprocess: offline HF, no W&B unless a key is set. When this
    process may reach the hub (no ``HF_HUB_OFFLINE=1``), the subprocess may still fetch the data of an
    in-training eval task it lacks, into this process's hub mirror (see ``eval_data.task_data``)."""
    env = dict(os.environ)
    if not hub.hub_offline():
        env[HUB_FETCH_ENV] = "1"
        env[hub.MIRROR_ENV] = hub.mirror_root()
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if not use_wandb():
        env["WANDB_MODE"] = "disabled"
    # Only the CPU path pins JAX to CPU; on GPU/TPU workers JAX picks the accelerator.
    if accelerator == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    elif env.get("JAX_PLATFORMS") == "cpu":
        env.pop("JAX_PLATFORMS")
    env.pop("RAY_ADDRESS", None)  # Levanter must not attach to the engine's Ray (auto_start is off)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def _env_of(config: TrainLmOnPodConfig) -> dict[str, str]:
    env = dict((getattr(config.resources, "runtime_env", None) or {}).get("env_vars") or {})
    env.update(config.env_vars or {})
    return env


def training_process_env(config: TrainLmOnPodConfig) -> dict[str, str]:
    """The training subprocess's environment: :func:`training_env` with the run's own variables and
    its XLA flags (the spec's ``xla_flags``, else the device kind's) added to any ``XLA_FLAGS``."""
    accelerator = accelerator_of(config.resources)
    env = training_env(_env_of(config), accelerator)
    spec = config.train_config
    flags = unwrap_versioned_value(spec.trainer.xla_flags) if isinstance(spec, LmTrainSpec) else None
    xla_flags = xla_flags_env(
        env.get("XLA_FLAGS"), tuple(defaults_for(accelerator).xla_flags if flags is None else flags)
    )
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    return env


def run_levanter_train_lm(config: TrainLmOnPodConfig) -> dict[str, Any]:
    """Run (or resume) Levanter training into ``config.output_path``; returns step metadata.

    The subprocess builds Levanter's config itself (:mod:`marin_assets.training.levanter_main`), so
    this process never imports Levanter or JAX (unless the script itself built a Levanter config).
    ``train.log`` lives with the attempt (:class:`~marin_assets.training.training_log.AttemptLog`),
    so a resumed run -- on this host or one that took over -- continues its history.
    """
    if config.output_path is None:
        raise ValueError("TrainLmOnPodConfig.output_path is required here (checkpoints and exports go there)")
    if config.auto_build_caches:
        raise ValueError("TrainLmOnPodConfig.auto_build_caches=True cannot apply: caches are built by tokenize steps")
    out = str(config.output_path)
    host = host_index()  # one writer per run: host 0 writes the run's files, others under hosts/<i>/
    with AttemptLog(host_folder(out, host), "train.log") as attempt_log:
        log_path = attempt_log.path
        spec = levanter_main.write_spec(
            log_path + ".config.pkl", "marin_assets.training.levanter_config:prepare_training", config
        )
        missing_path = eval_harness.missing_tasks_path(levanter_main.local_yaml_path(spec))
        if os.path.exists(missing_path):
            os.remove(missing_path)  # a list left by an earlier attempt
        with open(log_path, "ab") as log:
            log.write(f"\n{START_MARK} {time.strftime('%Y-%m-%dT%H:%M:%S')} =====\n".encode())
        start = time.monotonic()
        env = training_process_env(config)
        stall_s = progress_timeout_s(config.progress_timeout_s)
        proc = subprocess_runner.start(levanter_main.command("train", spec), log_path, env, label="train")
        # No wall-clock limit: stopped only without progress, on a lost lease (the fence kills it)
        # or when cancelled (SIGTERM first: it checkpoints its last step).
        rc = subprocess_runner.wait(proc, None, stall_timeout_s=stall_s, term_grace_s=TERM_GRACE_S)
        log_text = attempt_log.text()
        if rc != 0:
            missing = eval_harness.read_missing_tasks(levanter_main.local_yaml_path(spec))
            if missing is not None:
                raise missing  # names each task and eval_harness_tasks=(); nothing was trained
            raise RuntimeError(f"levanter train_lm exited with {rc}; log {attempt_log.remote}:\n{log_text[-4000:]}")
        # The pickled spec was the subprocess's input only: train_config.yaml is the record of what ran
        # (the pickle would publish the attempt's staging path and the step's env_vars).
        with contextlib.suppress(OSError):
            os.remove(spec)
        with open(levanter_main.plan_path(spec)) as handle:
            plan = json.load(handle)
    return summarize_training(
        out, plan, log_text, time.monotonic() - start, resumed_from_step(log_text), write_to=host_folder(out, host)
    )


def _finite_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def _steady_mean(steps: Mapping[int, Mapping[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over the logged steps, skipping the first fifth (compilation) when there are
    five or more; None when no step logged it."""
    values = [v for _, m in sorted(steps.items()) if (v := _finite_float(m.get(key))) is not None]
    steady = values[len(values) // 5 :] if len(values) >= 5 else values
    return sum(steady) / len(steady) if steady else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def summarize_training(
    out: str,
    plan: Mapping[str, Any],
    log_text: str,
    wall_s: float,
    resumed_from: int = 0,
    write_to: str | None = None,
) -> dict:
    """Metadata of a finished run from its metric log and output folder; writes ``metrics.jsonl``,
    ``train_summary.json`` and ``loss_curve.png`` to ``write_to`` (default ``out``; another host's
    folder on a multi-host slice, :mod:`marin_assets.training.hosts`).

    Every loss is a plain float under a flat key (``final_loss``, ``eval_loss``, ``eval/<set>/loss``)
    so Dagster plots it across materializations; ``loss_table`` is the curve as a table.
    """
    steps, summary = parse_metrics(log_text)
    write_to = out if write_to is None else write_to
    atomic_write_text(join_path(write_to, "metrics.jsonl"), metrics_jsonl(log_text))
    train_losses = [(s, float(m["train/loss"])) for s, m in sorted(steps.items()) if "train/loss" in m]
    eval_losses = [(s, float(m["eval/loss"])) for s, m in sorted(steps.items()) if "eval/loss" in m]
    steady = _steady_mean(steps, "throughput/tokens_per_second")
    tokens_seen = int(plan["num_train_steps"]) * int(plan["train_batch_size"]) * int(plan["seq_len"])
    checkpoints = [p for _, p in list_step_dirs(join_path(out, DEFAULT_CHECKPOINTS_PATH))]
    hf = [p for _, p in list_step_dirs(join_path(out, DEFAULT_HF_CHECKPOINTS_PATH))]
    meta: dict[str, Any] = {
        "initial_loss": train_losses[0][1] if train_losses else None,
        "final_loss": train_losses[-1][1] if train_losses else None,
        "initial_eval_loss": eval_losses[0][1] if eval_losses else None,
        "eval_loss": eval_losses[-1][1] if eval_losses else None,
    }
    last_eval: dict[str, float] = {}
    for _, metrics in sorted(steps.items()):
        for key, value in metrics.items():
            if key.startswith("eval/") and key.count("/") == 2 and _finite_float(value) is not None:
                last_eval[key] = float(value)
            elif key.startswith("lm_eval/") and _finite_float(value) is not None:
                last_eval[key] = float(value)  # in-training lm-eval: lm_eval/<task>/<metric>
    meta.update(sorted(last_eval.items()))
    meta.update(
        {
            "tokens_seen": tokens_seen,
            "tokens_per_s": round(steady, 1) if steady is not None else None,
            # Levanter's throughput/mfu (percent; absent where it knows no peak FLOPs, e.g. CPU)
            "mfu": _round(_steady_mean(steps, "throughput/mfu"), 2),
            "step_time_s": _round(_steady_mean(steps, "throughput/duration"), 4),
            "tokens_per_s_wall": round(tokens_seen / wall_s, 1) if wall_s > 0 else None,
            "wall_s": round(wall_s, 2),
            "parameter_count": summary.get("parameter_count"),
            "num_train_steps": int(plan["num_train_steps"]),
            "resumed_from_step": resumed_from,
            "checkpoints": checkpoints,
            "hf_exports": hf,
            "hf_export": hf[-1] if hf else None,
            "output_path": out,
        }
    )
    rows = []
    for s, m in sorted(steps.items()):
        train_loss, eval_loss = _finite_float(m.get("train/loss")), _finite_float(m.get("eval/loss"))
        if train_loss is not None or eval_loss is not None:
            rows.append({"step": s, "train_loss": train_loss, "eval_loss": eval_loss})
    if rows:
        meta["loss_table"] = table(rows)
    atomic_write_text(
        join_path(write_to, "train_summary.json"),
        json.dumps({k: v for k, v in meta.items() if k != "loss_table"}, indent=2),
    )
    png = loss_curve_png(steps)
    if png:
        atomic_write_bytes(join_path(write_to, "loss_curve.png"), png)
        meta["loss_curve"] = markdown(f"![loss curve](data:image/png;base64,{base64.b64encode(png).decode()})")
    return meta
