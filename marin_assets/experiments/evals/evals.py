"""Marin's ``experiments/evals/evals.py``: evaluation steps (``default_eval`` and the lm-eval steps).

Same names, arguments and step names as Marin's (``default_base_eval``: Marin's base-model suite). Differences that follow from running offline on
CPU (documented in ``docs/models.md``): every lm-eval evaluator runs lm-eval's ``hf`` model on the
HF export in a subprocess; a task's data must be in the local Hugging Face cache or given as task
YAML, otherwise the step fails naming the task (nothing is downloaded); ``resource_config`` defaults
to None (CPU here, Marin's default is a TPU v4-8). The step also scores the training run's
validation caches with Levanter (loss, bits per byte) when it evaluates a training step.

Keywords this project adds (Marin scripts do not pass them): ``name`` (the step name after
``evaluation/``), ``validation_caches``, ``max_eval_batches``, ``include_path``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marin_assets.eval_data.task_data import task_label
from marin_assets.evaluation.evaluation_config import EvalTaskConfig, EvaluationConfig
from marin_assets.evaluation.run import evaluate
from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    StepPath,
    StepResources,
    ensure_versioned,
    output_path_of,
    this_output_path,
    unwrap_versioned_value,
    versioned,
)
from marin_assets.experiments.evals.task_configs import (
    BASE_GENERATION_TASKS,
    CORE_TASKS,
    CORE_TASKS_PLUS_LEADERBOARD,
    KEY_GENERATION_TASKS,
    KEY_MULTIPLE_CHOICE_TASKS,
    MMLU_0_SHOT,
    MMLU_5_SHOT,
    MMLU_PRO_5_SHOT,
)
from marin_assets.training.train_config import accelerator_of


def _infer_model_name_for_path(model_path: str) -> str:
    """``"_".join`` of the last two path components (Marin's rule)."""
    parts = str(model_path).rstrip("/").split("/")
    return "_".join(parts[-2:])


def extract_model_name_and_path(step: ExecutorStep | InputName | str) -> tuple[str, StepPath]:
    """``(name, path of its HF exports)`` of a training step, an ``InputName`` or a path."""
    if isinstance(step, ExecutorStep):
        return step.name, output_path_of(step, "hf")
    if isinstance(step, InputName):
        name = step.step.name if step.step is not None else _infer_model_name_for_path(step.name or "model")
        return name, step
    return _infer_model_name_for_path(step), step


def _validation_caches_of(step: ExecutorStep) -> dict[str, Any]:
    """The training step's data components (their ``validation`` splits are scored by Levanter)."""
    config = getattr(step, "config", None)
    data = getattr(getattr(config, "train_config", None), "data", None)
    configs = getattr(data, "configs", None) or {}
    return {name: source.cache_dir for name, source in configs.items()}


def _eval_step(
    step_name: str,
    evaluator: str,
    model_path: StepPath,
    evals: Sequence[EvalTaskConfig],
    resource_config: StepResources | None,
    max_eval_instances: int | None,
    apply_chat_template: bool,
    discover_latest_checkpoint: bool,
    validation_caches: Mapping[str, Any] | None,
    max_eval_batches: int | None,
    include_path: str | None,
) -> ExecutorStep:
    caches = {k: (InputName.hardcoded(v) if isinstance(v, str) else v) for k, v in (validation_caches or {}).items()}
    tasks = [unwrap_versioned_value(t) for t in unwrap_versioned_value(evals)]
    return ExecutorStep(
        name=step_name,
        fn=evaluate,
        config=EvaluationConfig(
            evaluator=evaluator,
            model_name=None,
            model_path=model_path,  # a plain path stays plain (not in the version), as in Marin
            evaluation_path=this_output_path(),
            evals=versioned(list(tasks)),
            discover_latest_checkpoint=discover_latest_checkpoint,
            max_eval_instances=ensure_versioned(max_eval_instances),
            resource_config=resource_config,
            apply_chat_template=apply_chat_template,
            validation_caches=caches,
            max_eval_batches=ensure_versioned(max_eval_batches) if max_eval_batches is not None else None,
            include_path=include_path,
        ),
        description=f"lm-eval tasks {', '.join(task_label(t) for t in tasks) or '(none)'}"
        + (f" and Levanter bits-per-byte on {', '.join(caches)}" if caches else "")
        + ".",
        pip_dependency_groups=["eval"],
        resources=None if accelerator_of(resource_config) == "cpu" else resource_config,
    )


def evaluate_levanter_lm_evaluation_harness(
    model_name: str,
    model_path: StepPath,
    evals: list[EvalTaskConfig],
    resource_config: StepResources | None = None,
    max_eval_instances: int | None = None,
    apply_chat_template: bool = False,
    discover_latest_checkpoint: bool = True,
    *,
    name: str | None = None,
    validation_caches: Mapping[str, Any] | None = None,
    max_eval_batches: int | None = None,
    include_path: str | None = None,
) -> ExecutorStep:
    """A step ``evaluation/lm_evaluation_harness_levanter/lmeval_debug_<model_name>`` (or
    ``evaluation/<name>``) running ``evals`` on the model at ``model_path``."""
    return _eval_step(
        f"evaluation/{name}" if name else f"evaluation/lm_evaluation_harness_levanter/lmeval_debug_{model_name}",
        "levanter_lm_evaluation_harness",
        model_path,
        evals,
        resource_config,
        max_eval_instances,
        apply_chat_template,
        discover_latest_checkpoint,
        validation_caches,
        max_eval_batches,
        include_path,
    )


def evaluate_lm_evaluation_harness(
    model_name: str,
    model_path: StepPath,
    evals: list[EvalTaskConfig],
    max_eval_instances: int | None = None,
    engine_kwargs: dict | None = None,
    resource_config: StepResources | None = None,
    apply_chat_template: bool = False,
    wandb_tags: list[str] | None = None,
    discover_latest_checkpoint: bool = True,
) -> ExecutorStep:
    """A step ``evaluation/lm_evaluation_harness/<model_name>`` (Marin's vLLM evaluator; lm-eval's
    ``hf`` model on CPU here, so ``engine_kwargs`` must be None)."""
    if engine_kwargs:
        raise ValueError("engine_kwargs configure vLLM, which cannot run here; pass engine_kwargs=None")
    return _eval_step(
        f"evaluation/lm_evaluation_harness/{model_name}",
        "lm_evaluation_harness",
        model_path,
        evals,
        resource_config,
        max_eval_instances,
        apply_chat_template,
        discover_latest_checkpoint,
        None,
        None,
        None,
    )


def default_eval(
    step: ExecutorStep | InputName | str,
    resource_config: StepResources | None = None,
    evals: Sequence[EvalTaskConfig] | None = None,
    max_eval_instances: int | None = None,
    apply_chat_template: bool = False,
    discover_latest_checkpoint: bool = True,
    *,
    name: str | None = None,
    validation_caches: Mapping[str, Any] | None = None,
    max_eval_batches: int | None = None,
    include_path: str | None = None,
) -> ExecutorStep:
    """Evaluate a training step (its newest HF export), an ``InputName`` or a model path on ``evals``
    (Marin's ``CORE_TASKS`` when None) -- plus, for a training step, Levanter bits-per-byte on the
    validation splits of its data (``validation_caches`` overrides which caches)."""
    model_name, model_path = extract_model_name_and_path(step)
    if validation_caches is None and isinstance(step, ExecutorStep):
        validation_caches = _validation_caches_of(step)
    return evaluate_levanter_lm_evaluation_harness(
        model_name,
        model_path,
        list(CORE_TASKS if unwrap_versioned_value(evals) is None else unwrap_versioned_value(evals)),
        resource_config,
        max_eval_instances=max_eval_instances,
        apply_chat_template=apply_chat_template,
        discover_latest_checkpoint=discover_latest_checkpoint,
        name=name,
        validation_caches=validation_caches,
        max_eval_batches=max_eval_batches,
        include_path=include_path,
    )


def default_base_eval(
    step: ExecutorStep | InputName | str,
    resource_config: StepResources | None = None,
    max_eval_instances: int | None = None,
    engine_kwargs: dict | None = None,
    run_generation_evals: bool = True,
    discover_latest_checkpoint: bool = True,
) -> list[ExecutorStep]:
    """Marin's base-model eval suite: ``CORE_TASKS_PLUS_LEADERBOARD``, MMLU 0-shot, MMLU 5-shot and
    MMLU-Pro 5-shot (one ``default_eval`` step each, so each macro average is its own), plus
    ``BASE_GENERATION_TASKS`` when ``run_generation_evals``.

    Marin's arguments and order; ``resource_config`` defaults to None (CPU) here and ``engine_kwargs``
    (vLLM settings, Marin's default ``DEFAULT_LM_EVAL_MODEL_KWARGS``) must stay None. Every task's
    data must be local when the steps run (see ``default_eval``).
    """
    eval_jobs = [
        default_eval(
            step=step,
            resource_config=resource_config,
            evals=evals,
            discover_latest_checkpoint=discover_latest_checkpoint,
        )
        for evals in (CORE_TASKS_PLUS_LEADERBOARD, (MMLU_0_SHOT,), (MMLU_5_SHOT,), (MMLU_PRO_5_SHOT,))
    ]
    if run_generation_evals:
        name, model_step_path = extract_model_name_and_path(step)
        eval_jobs.append(
            evaluate_lm_evaluation_harness(
                name,
                model_step_path,
                list(BASE_GENERATION_TASKS),
                max_eval_instances=max_eval_instances,
                engine_kwargs=engine_kwargs,
                resource_config=resource_config,
                discover_latest_checkpoint=discover_latest_checkpoint,
            )
        )
    return eval_jobs


def default_key_evals(
    step: ExecutorStep | InputName | str,
    resource_config: StepResources | None = None,
    model_name: str | None = None,
    max_eval_instances: int | None = None,
    engine_kwargs: dict | None = None,
) -> list[ExecutorStep]:
    """Marin's key evals: lm-eval on ``KEY_GENERATION_TASKS`` and the Levanter-harness step on
    ``KEY_MULTIPLE_CHOICE_TASKS`` (``evaluation/lm_evaluation_harness/<model>`` and
    ``evaluation/lm_evaluation_harness_levanter/lmeval_debug_<model>``), as Marin's signature has it.

    ``resource_config`` (Marin passes a TPU preset, e.g. ``SINGLE_TPU_V5p_8_FULL``) is the steps'
    resources: a TPU request needs a TPU when the steps run; None runs them on CPU here.
    ``engine_kwargs`` configure vLLM and must stay None here.
    """
    name, model_step_path = extract_model_name_and_path(step)
    if model_name is None:
        model_name = name
    return [
        evaluate_lm_evaluation_harness(
            model_name,
            model_step_path,
            list(KEY_GENERATION_TASKS),
            max_eval_instances=max_eval_instances,
            engine_kwargs=engine_kwargs,
            resource_config=resource_config,
        ),
        evaluate_levanter_lm_evaluation_harness(
            model_name,
            model_step_path,
            list(KEY_MULTIPLE_CHOICE_TASKS),
            resource_config,
            max_eval_instances=max_eval_instances,
        ),
    ]


__all__ = [
    "default_base_eval",
    "default_eval",
    "default_key_evals",
    "evaluate_levanter_lm_evaluation_harness",
    "evaluate_lm_evaluation_harness",
    "extract_model_name_and_path",
]
