"""Marin's ``marin.evaluation.evaluation_config``: ``EvalTaskConfig`` and ``EvaluationConfig``.

Marin's fields, names and defaults, then this project's additions (Levanter perplexity on
tokenized validation caches, a local task folder, batch size, timeout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marin_assets.execution.step import StepPath, StepResources


@dataclass(frozen=True)
class EvalTaskConfig:
    """One lm-eval task: its name, few-shot count and an optional alias for its results."""

    name: str
    num_fewshot: int
    task_alias: str | None = None


@dataclass(frozen=True)
class EvaluationConfig:
    """Config of :func:`marin_assets.evaluation.run.evaluate`.

    Attributes:
        evaluator: ``"lm_evaluation_harness_hf"``, ``"levanter_lm_evaluation_harness"`` or
            ``"lm_evaluation_harness"`` -- all run lm-eval's ``hf`` model on CPU here -- or
            ``"levanter_perplexity"`` (only the Levanter bits-per-byte part).
        model_name: a label for the model (None: derived from ``model_path``).
        evaluation_path: where ``results.json`` goes (the step output).
        evals: lm-eval tasks; their data must be in the local Hugging Face cache or given as task
            YAML (``include_path``, or the shipped ``marin_docstring_*`` tasks).
        model_path: an HF model folder, a training run's ``hf`` folder or the run's output.
        discover_latest_checkpoint: use the newest ``step-N`` below ``model_path``.
        launch_with_ray: Marin's flag; the evaluators here are subprocesses of the step either way.
        max_eval_instances: lm-eval ``limit`` per task (None: all).
        apply_chat_template: passed to lm-eval.
        validation_caches: name -> tokenized cache root(s) whose ``validation`` split Levanter
            scores (loss, bits per byte); empty: none.
        max_eval_batches: Levanter eval batches per validation set (None: all).
        include_path: a folder of extra lm-eval task YAMLs (the shipped tasks are always included).
        batch_size: eval batch size for both evaluators.
        timeout_s: per evaluator subprocess.
    """

    evaluator: str
    model_name: str | None
    evaluation_path: StepPath = "tmp/output"
    evals: list[EvalTaskConfig] = field(default_factory=list)
    model_path: StepPath | None = None
    discover_latest_checkpoint: bool = False
    launch_with_ray: bool = True
    max_eval_instances: int | None = None
    engine_kwargs: dict | None = None
    resource_config: StepResources | None = None
    generation_params: dict | None = None
    apply_chat_template: bool = False
    wandb_tags: list[str] | None = None
    max_length: int | None = None
    validation_caches: Mapping[str, StepPath | Sequence[StepPath]] = field(default_factory=dict)
    max_eval_batches: int | None = None
    include_path: StepPath | None = None
    batch_size: int = 16
    timeout_s: float = 3600.0
