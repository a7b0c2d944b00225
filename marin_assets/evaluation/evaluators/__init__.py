"""Marin's ``marin.evaluation.evaluators``: the evaluators ``run.evaluate`` dispatches to.

* :class:`LmEvaluationHarnessEvaluator` -- lm-eval's ``hf`` model on the HF export, CPU torch,
  offline (Marin's ``lm_evaluation_harness_hf``; ``levanter_lm_evaluation_harness`` and
  ``lm_evaluation_harness`` map to it here, as neither vLLM nor an accelerator is available), plus
  Levanter's loss / bits-per-byte on the config's validation caches, side by side.
* :class:`LevanterPerplexityEvaluator` -- only Levanter's loss / bits-per-byte.

Other Marin evaluators (HELM, AlpacaEval, evalchemy) need services or downloads: asking for one is
an error naming it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from marin_assets.evaluation.evaluation_config import EvaluationConfig

LM_EVAL_EVALUATORS = ("lm_evaluation_harness_hf", "levanter_lm_evaluation_harness", "lm_evaluation_harness")


class LmEvaluationHarnessEvaluator:
    """lm-eval tasks (and Levanter bits-per-byte when the config names validation caches)."""

    def evaluate(self, config: EvaluationConfig) -> dict[str, Any]:
        """Run the evaluation; see :func:`marin_assets.evaluation.evaluate.run_evaluation`."""
        from marin_assets.evaluation.evaluate import run_evaluation

        return run_evaluation(config)


class LevanterPerplexityEvaluator:
    """Levanter's loss and bits per byte on the validation caches only."""

    def evaluate(self, config: EvaluationConfig) -> dict[str, Any]:
        """Run the evaluation without lm-eval tasks."""
        from marin_assets.evaluation.evaluate import run_evaluation

        if not config.validation_caches:
            raise ValueError("EvaluationConfig.validation_caches is empty: levanter_perplexity has nothing to score")
        return run_evaluation(replace(config, evals=[]))


def get_evaluator(config: EvaluationConfig) -> Any:
    """The evaluator named by ``config.evaluator``; ValueError naming it when it cannot run here."""
    if config.evaluator in LM_EVAL_EVALUATORS:
        return LmEvaluationHarnessEvaluator()
    if config.evaluator == "levanter_perplexity":
        return LevanterPerplexityEvaluator()
    raise ValueError(
        f"EvaluationConfig.evaluator {config.evaluator!r} cannot run here (offline, CPU); use one of "
        f"{', '.join(LM_EVAL_EVALUATORS)} or levanter_perplexity"
    )
