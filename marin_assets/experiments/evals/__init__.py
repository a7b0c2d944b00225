"""Marin's ``experiments.evals`` package: ``evals`` (``default_eval`` ...) and ``task_configs``."""

from marin_assets.experiments.evals.evals import (
    default_base_eval,
    default_eval,
    default_key_evals,
    evaluate_levanter_lm_evaluation_harness,
    evaluate_lm_evaluation_harness,
    extract_model_name_and_path,
)

__all__ = [
    "default_base_eval",
    "default_eval",
    "default_key_evals",
    "evaluate_levanter_lm_evaluation_harness",
    "evaluate_lm_evaluation_harness",
    "extract_model_name_and_path",
]
