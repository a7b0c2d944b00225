"""Training as a step: Levanter's ``train_lm`` on a mixture of tokenized caches.

``default_train`` returns a step ``checkpoints/<name>`` whose function runs Levanter's ``train_lm``
in a subprocess (:mod:`marin_assets.training.levanter_main`), which builds Levanter's ``TrainLmConfig``,
writes it (``<out>/train_config.yaml``) and trains on it exactly as ``python -m
levanter.main.train_lm --config_path`` would. A subprocess keeps JAX's imports, memory and threads
out of the engine/Dagster process,
makes "kill the worker" a real SIGKILL of one process, and lets the step read throughput and loss
from Levanter's own JSON tracker log afterwards.

Output layout::

    <out>/train_config.yaml        the exact Levanter config that ran
    <out>/checkpoints/step-N/      Levanter checkpoints (resume point)
    <out>/hf/step-N/               HF (safetensors) export, loadable by transformers / lm-eval
    <out>/train.log                Levanter's log; json_logger metric records are lines in it
    <out>/metrics.jsonl            the metric records alone (step, metrics)
    <out>/loss_curve.png           train/eval loss per step
    <out>/train_summary.json       what the step returns as metadata

Resume: the run id is derived from the output path and the checkpointer writes to a fixed folder,
so a rerun of a killed step finds ``checkpoints/step-N`` and Levanter continues from step N.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from marin_assets.execution.metadata import markdown
from marin_assets.execution.step import ExecutorStep, InputName, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_bytes, atomic_write_text, is_local, join_path
from marin_assets.training import levanter_main, subprocess_runner
from marin_assets.training.levanter_config import (
    build_levanter_config,
    default_run_id,
    levanter_config_yaml,
    use_wandb,
    write_reference_checkpoint,
)
from marin_assets.training.train_config import (
    DEFAULT_TRAIN_CONFIG,
    TINY_LLAMA,
    LlamaModelConfig,
    MixtureData,
    SimpleTrainConfig,
    TrainConfig,
)
from marin_assets.training.training_log import list_step_dirs, loss_curve_png, parse_metrics

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def training_env(extra: Mapping[str, str] | None = None, accelerator: str = "cpu") -> dict[str, str]:
    """Environment for the training subprocess: offline HF, no W&B unless a key is set."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if not use_wandb():
        env["WANDB_MODE"] = "disabled"
    # Only the CPU path pins JAX to CPU; on GPU/TPU workers JAX picks the accelerator.
    if accelerator == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    elif env.get("JAX_PLATFORMS") == "cpu":
        env.pop("JAX_PLATFORMS")
    env.pop("RAY_ADDRESS", None)  # Levanter must not attach to the engine's Ray (auto_start is off)
    env.update(extra or {})
    return env


def _log_path(config: TrainConfig) -> str:
    # The log is appended across resumes; on object stores it is written locally and uploaded.
    if is_local(config.output_path):
        return join_path(config.output_path, "train.log")
    return os.path.join("/tmp", f"marin-train-{default_run_id(config.output_path)}.log")


def _start_trainer(config: TrainConfig, cmd: list[str], log_path: str) -> subprocess.Popen:
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n===== marin: train_lm start {time.strftime('%Y-%m-%dT%H:%M:%S')} =====\n".encode())
    return subprocess_runner.start(cmd, log_path, training_env(config.env, config.accelerator))


def launch_training(config: TrainConfig, yaml_path: str, log_path: str) -> subprocess.Popen:
    """Start ``python -m levanter.main.train_lm --config_path yaml_path`` (own process group; dies
    with its runner and with the step's lease, see ``subprocess_runner``)."""
    return _start_trainer(
        config, [sys.executable, "-m", "levanter.main.train_lm", "--config_path", yaml_path], log_path
    )


def run_training(config: TrainConfig) -> dict:
    """Run (or resume) Levanter training into ``config.output_path``; returns step metadata.

    The subprocess builds Levanter's config itself (:mod:`marin_assets.training.levanter_main`), so this
    process never imports Levanter or JAX.
    """
    out = config.output_path
    resumed_from = list_step_dirs(join_path(out, "checkpoints"))
    log_path = _log_path(config)
    start = time.monotonic()
    if config.in_process:
        from levanter.main.train_lm import main as train_main

        lev_config = build_levanter_config(config)
        write_reference_checkpoint(lev_config.model.reference_checkpoint, config.model, lev_config.data.tokenizer)
        atomic_write_text(join_path(out, "train_config.yaml"), levanter_config_yaml(lev_config))
        train_main(lev_config)
        log_text = ""
    else:
        spec = levanter_main.write_spec(log_path + ".config.pkl", config)
        proc = _start_trainer(config, levanter_main.command("train", spec), log_path)
        try:
            rc = subprocess_runner.wait(proc, config.timeout_s)  # kills the trainer if cancelled
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"training did not finish in {config.timeout_s}s; log: {log_path}") from None
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
        if rc != 0:
            raise RuntimeError(f"levanter train_lm exited with {rc}; log {log_path}:\n{log_text[-4000:]}")
        if not is_local(out):
            atomic_write_bytes(join_path(out, "train.log"), log_text.encode())
    wall = time.monotonic() - start
    return summarize_training(config, log_text, wall, resumed_from[-1][0] if resumed_from else 0)


def summarize_training(config: TrainConfig, log_text: str, wall_s: float, resumed_from_step: int = 0) -> dict:
    """Metadata of a finished run from its metric log and output folder (also writes files)."""
    out = config.output_path
    steps, summary = parse_metrics(log_text)
    lines = [json.dumps({"step": s, "metrics": m}, default=str) for s, m in sorted(steps.items())]
    atomic_write_text(join_path(out, "metrics.jsonl"), "\n".join(lines) + "\n")
    train_losses = [(s, float(m["train/loss"])) for s, m in sorted(steps.items()) if "train/loss" in m]
    eval_losses = [(s, float(m["eval/loss"])) for s, m in sorted(steps.items()) if "eval/loss" in m]
    # Steady-state throughput: skip the first logged steps (compilation) when there are enough.
    tps = [
        float(m["throughput/tokens_per_second"])
        for s, m in sorted(steps.items())
        if "throughput/tokens_per_second" in m
    ]
    steady = tps[len(tps) // 5 :] if len(tps) >= 5 else tps
    train = config.train
    tokens_seen = train.num_train_steps * train.train_batch_size * config.model.seq_len
    checkpoints = [p for _, p in list_step_dirs(join_path(out, "checkpoints"))]
    hf = [p for _, p in list_step_dirs(join_path(out, "hf"))]
    meta: dict[str, Any] = {
        "initial_loss": train_losses[0][1] if train_losses else None,
        "final_loss": train_losses[-1][1] if train_losses else None,
        "initial_eval_loss": eval_losses[0][1] if eval_losses else None,
        "eval_loss": eval_losses[-1][1] if eval_losses else None,
        "tokens_seen": tokens_seen,
        "tokens_per_s": round(sum(steady) / len(steady), 1) if steady else None,
        "tokens_per_s_wall": round(tokens_seen / wall_s, 1) if wall_s > 0 else None,
        "wall_s": round(wall_s, 2),
        "parameter_count": summary.get("parameter_count"),
        "num_train_steps": train.num_train_steps,
        "resumed_from_step": resumed_from_step,
        "checkpoints": checkpoints,
        "hf_exports": hf,
        "hf_export": hf[-1] if hf else None,
        "output_path": out,
    }
    png = loss_curve_png(steps)
    if png:
        atomic_write_bytes(join_path(out, "loss_curve.png"), png)
        meta["loss_curve"] = markdown(f"![loss curve](data:image/png;base64,{base64.b64encode(png).decode()})")
    atomic_write_text(
        join_path(out, "train_summary.json"), json.dumps({k: v for k, v in meta.items() if k != "loss_curve"}, indent=2)
    )
    return meta


# ----------------------------------------------------------------------------------------------
# The step
# ----------------------------------------------------------------------------------------------


def accelerator_kind(resources: Any) -> str:
    """``"cpu"``, ``"gpu"`` or ``"tpu"`` for an accelerator config of ``marin_resources.accelerators``."""
    if resources is None:
        return "cpu"
    kind = type(resources).__name__.lower()
    for name in ("gpu", "tpu"):
        if kind.startswith(name):
            return name
    return "cpu"


TokenizedLike = ExecutorStep | InputName | str | Sequence[str]


def _as_component(value: Any) -> Any:
    if isinstance(value, str):
        return InputName.hardcoded(value)
    if isinstance(value, ExecutorStep) and value.partitioned_by is not None:
        return value.partitions()  # every drop of a partitioned cache
    if isinstance(value, (list, tuple)):
        return [_as_component(v) for v in value]
    return value


def default_train(
    name: str,
    tokenized: TokenizedLike | MixtureData | Mapping[str, TokenizedLike],
    model_config: LlamaModelConfig = TINY_LLAMA,
    train_config: SimpleTrainConfig = DEFAULT_TRAIN_CONFIG,
    tags: Sequence[str] = (),
    eval_harness_tasks: Sequence[str] = (),
    use_default_validation: bool = True,
    resources: Any = None,
    validation_sets: Mapping[str, TokenizedLike] | None = None,
) -> ExecutorStep:
    """A step ``checkpoints/<name>`` training a Levanter LM on ``tokenized``.

    Args:
        name: step name suffix.
        tokenized: one tokenized step/path (weight 1), a dict name -> tokenized (equal weights), or
            a :class:`MixtureData` from :func:`lm_mixture_data_config`. A partitioned tokenized
            step contributes every drop.
        model_config: model shape (tiny Llama by default); versioned.
        train_config: trainer/optimizer settings; versioned.
        tags: tracker tags (not versioned).
        eval_harness_tasks: lm-eval task names for :func:`default_eval` on this step (recorded).
        use_default_validation: evaluate on the validation splits of the caches while training.
        resources: accelerator config (``marin_resources.accelerators``): CPU/GPU/TPU request.
        validation_sets: extra caches evaluated during training (weight 0).
    """
    if isinstance(tokenized, MixtureData):
        components, weights = dict(tokenized.components), dict(tokenized.weights)
    elif isinstance(tokenized, Mapping):
        components, weights = dict(tokenized), {k: 1.0 for k in tokenized}
    else:
        components, weights = {"data": tokenized}, {"data": 1.0}
    for vname, value in (validation_sets or {}).items():
        if vname in components:
            raise ValueError(f"validation set {vname!r} clashes with a training component")
        components[vname] = value
    return ExecutorStep(
        name=f"checkpoints/{name}",
        fn=run_training,
        config=TrainConfig(
            output_path=this_output_path(),
            components={k: _as_component(v) for k, v in components.items()},
            weights=versioned(weights),
            model=versioned(model_config),
            train=versioned(train_config),
            tags=tuple(tags),
            eval_harness_tasks=tuple(eval_harness_tasks),
            use_default_validation=versioned(use_default_validation),
            accelerator=accelerator_kind(resources),
        ),
        description=f"Levanter training of {name} ({model_config.num_layers} layers, d={model_config.hidden_dim}, "
        f"{train_config.num_train_steps} steps x {train_config.train_batch_size} x {model_config.seq_len} tokens).",
        pip_dependency_groups=["train"],
        resources=resources,
    )


def hf_export_path(train_step: ExecutorStep) -> InputName:
    """The HF export folder of a training step (``<out>/hf``; the last ``step-N`` is used)."""
    return train_step / "hf"
