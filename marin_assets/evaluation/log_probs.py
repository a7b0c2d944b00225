"""Marin's ``marin.evaluation.log_probs``: ``default_lm_log_probs`` -- a step that scores a model's log
probabilities (loss, bits per byte) on the validation sets of a data mixture with Levanter.

Same name, arguments, step name (``analysis/log_probs/<name>``) and config (``EvalLmConfig``) as
Marin's. Here the step runs Levanter's ``eval_lm`` in a subprocess on CPU through the evaluation step
(:mod:`marin_assets.evaluation.evaluate`, the ``levanter_perplexity`` evaluator) and writes
``results.json`` with ``levanter_validation/<component>`` loss and bits per byte; per-token entropies
(``log_entropy``) and W&B logging are Marin's TPU-side extras and not written. The checkpoint must
be an HF export (``checkpoint_is_hf=True``: a folder with ``config.json``, or a training run whose
``hf/step-N`` is used); a Levanter checkpoint fails when the step runs, saying so. Only components
whose cache has a ``validation`` split are scored.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from marin_assets.evaluation.evaluation_config import EvaluationConfig
from marin_assets.evaluation.run import evaluate
from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    StepPath,
    StepResources,
    this_output_path,
    unwrap_versioned_value,
)
from marin_assets.utilities.executor_utils import ckpt_path_to_step_name


@dataclass
class EvalLmConfig:
    """Marin's config of the log-probabilities step (same fields; ``resource_config`` may be None: CPU)."""

    name: str | None
    checkpoint_path: StepPath
    model: Any
    datasets: Any
    resource_config: StepResources | None = None
    per_device_batch_size: int = 4
    output_path: StepPath = dataclasses.field(default_factory=this_output_path)
    checkpoint_is_hf: bool = False
    """Whether the checkpoint is in HF format."""
    log_entropy: bool = True
    max_samples_per_dataset: int | None = None
    wandb_tags: list[str] | None = None


def default_lm_log_probs(
    checkpoint: str | InputName,
    model: Any,
    data: Any,
    checkpoint_is_hf: bool,
    per_device_batch_size: int = 4,
    max_samples_per_dataset: int | None = None,
    name: str | None = None,
    wandb_tags: list[str] | None = None,
) -> ExecutorStep:
    """Marin's: a step ``analysis/log_probs/<name>`` (``name`` from the checkpoint when None)."""
    if not name:
        name = ckpt_path_to_step_name(checkpoint)
    return ExecutorStep(
        name=f"analysis/log_probs/{name}",
        fn=evaluate_lm_log_probs,
        config=EvalLmConfig(
            name=name,
            checkpoint_path=checkpoint,
            model=model,
            datasets=data,
            log_entropy=True,
            checkpoint_is_hf=checkpoint_is_hf,
            per_device_batch_size=per_device_batch_size,
            max_samples_per_dataset=max_samples_per_dataset,
            wandb_tags=wandb_tags,
        ),
    )


def _caches_of(datasets: Any) -> dict[str, Any]:
    """Component name -> cache root(s) of a data mixture (ours or Levanter's)."""
    configs = getattr(unwrap_versioned_value(datasets), "configs", None)
    if not configs:
        raise ValueError(f"log probs: the data {type(datasets).__name__} has no components (configs) to score")
    return {name: unwrap_versioned_value(source.cache_dir) for name, source in configs.items()}


def evaluate_lm_log_probs(config: EvalLmConfig) -> dict[str, Any]:
    """Step function: Levanter loss and bits per byte of the checkpoint on each component's validation split."""
    if not config.checkpoint_is_hf:
        raise ValueError(
            f"log probs of {config.checkpoint_path}: a Levanter checkpoint (checkpoint_is_hf=False) is not "
            "evaluated here; pass the run's HF export (the training output or its hf/step-N) with checkpoint_is_hf=True"
        )
    max_batches = None
    if config.max_samples_per_dataset is not None:
        max_batches = max(1, config.max_samples_per_dataset // config.per_device_batch_size)
    return evaluate(
        EvaluationConfig(
            evaluator="levanter_perplexity",
            model_name=config.name,
            evaluation_path=config.output_path,
            model_path=config.checkpoint_path,
            discover_latest_checkpoint=True,
            validation_caches=_caches_of(config.datasets),
            max_eval_batches=max_batches,
            batch_size=config.per_device_batch_size,
        )
    )
