"""Marin's ``marin.evaluation.run``: ``evaluate(config)`` picks the evaluator and runs it."""

from __future__ import annotations

from typing import Any

from marin_assets.evaluation.evaluation_config import EvaluationConfig
from marin_assets.evaluation.evaluators import get_evaluator


def evaluate(config: EvaluationConfig) -> dict[str, Any]:
    """Evaluate ``config.model_path`` on ``config.evals`` (and its validation caches); returns the
    step metadata (every metric a flat numeric key) and writes ``<evaluation_path>/results.json``."""
    return get_evaluator(config).evaluate(config)
