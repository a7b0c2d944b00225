"""Marin's ``marin.processing.tokenize.data_configs``: Levanter data mixtures over tokenize steps
(``lm_data_config``, ``lm_mixture_data_config``); cache dirs stay placeholders until training runs."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from marin_assets.execution.step import ExecutorStep, InputName, output_path_of
from marin_assets.processing.tokenize.tokenize import TokenizeConfig

TokenizerStep = ExecutorStep


def step_to_lm_mixture_component(step: ExecutorStep | InputName, include_raw_paths: bool) -> Any:
    """Levanter's ``UrlDatasetSourceConfig`` for a tokenize step, its cache dir a placeholder."""
    from levanter.data.text import UrlDatasetSourceConfig

    tokenize_step = step if isinstance(step, ExecutorStep) else step.step
    cache_dir = output_path_of(step) if isinstance(step, ExecutorStep) else step
    config = tokenize_step.config if tokenize_step is not None else None
    if not isinstance(config, TokenizeConfig):
        return UrlDatasetSourceConfig(cache_dir=cache_dir, train_urls=[], validation_urls=[])
    return UrlDatasetSourceConfig(
        cache_dir=cache_dir,
        train_urls=list(config.train_paths) if include_raw_paths else [],
        validation_urls=list(config.validation_paths) if include_raw_paths else [],
        format=config.format if config.format is not None else _text_format(),
    )


def _text_format() -> Any:
    from levanter.data.text import TextLmDatasetFormat

    return TextLmDatasetFormat()


def tokenizer_of(step: ExecutorStep | InputName) -> Any:
    """The (versioned) tokenizer of a tokenize step."""
    tokenize_step = step if isinstance(step, ExecutorStep) else step.step
    config = getattr(tokenize_step, "config", None)
    if not isinstance(config, TokenizeConfig):
        raise ValueError(f"could not determine the tokenizer of {step!r}: not a tokenize step")
    return config.tokenizer


def lm_mixture_data_config(
    components: Mapping[str, ExecutorStep | InputName],
    weights: Mapping[str, float],
    *,
    shuffle: bool | int = True,
    missing_weights_are_validation: bool = True,
    include_raw_paths: bool = True,
) -> Any:
    """Levanter's ``LMMixtureDatasetConfig`` over tokenize steps (cache dirs stay placeholders until
    the training step runs). Components without a weight are validation-only (weight 0)."""
    from levanter.data.text import LMMixtureDatasetConfig

    unknown = set(weights) - set(components)
    if unknown:
        raise ValueError(f"weights for unknown components: {sorted(unknown)}")
    if not components:
        raise ValueError("a mixture needs at least one component")
    full_weights = dict(weights)
    if missing_weights_are_validation:
        full_weights.update({name: 0.0 for name in components if name not in weights})
    first = next(iter(components.values()))
    return LMMixtureDatasetConfig(
        configs={name: step_to_lm_mixture_component(step, include_raw_paths) for name, step in components.items()},
        train_weights=full_weights,
        tokenizer=tokenizer_of(first),
        cache_dir=None,
        shuffle=shuffle,
        permutation_type="feistel" if shuffle else None,
    )


def lm_data_config(
    training_set: ExecutorStep | InputName,
    validation_sets: Mapping[str, ExecutorStep | InputName] | None = None,
    shuffle: bool | int = True,
) -> Any:
    """One tokenized training set (weight 1, named after its step) plus validation-only sets."""
    validation_sets = dict(validation_sets or {})
    step = training_set if isinstance(training_set, ExecutorStep) else training_set.step
    if step is None:
        raise ValueError("lm_data_config needs a tokenize step or an InputName of one, not a hardcoded path")
    train_name = os.path.basename(step.name)
    if train_name in validation_sets:
        raise ValueError(f"training set name {train_name!r} is also a validation set name")
    return lm_mixture_data_config({train_name: training_set, **validation_sets}, {train_name: 1.0}, shuffle=shuffle)
