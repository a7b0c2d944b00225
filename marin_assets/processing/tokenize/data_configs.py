"""Marin's ``marin.processing.tokenize.data_configs``: Levanter data mixtures over tokenize steps
(``lm_data_config``, ``lm_mixture_data_config``, ``add_validation_sets_to_mixture``,
``mixture_for_evaluation``); cache dirs stay placeholders until training runs."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Mapping
from typing import Any

from marin_assets.execution.step import ExecutorStep, InputName, VersionedValue, output_path_of, unwrap_versioned_value
from marin_assets.processing.tokenize.tokenize import TokenizeConfig, TokenizeConfigBase, resolve_tokenizer

TokenizerStep = ExecutorStep


def step_to_lm_mixture_component(step: ExecutorStep | InputName | str, include_raw_paths: bool) -> Any:
    """Levanter's ``UrlDatasetSourceConfig`` for a tokenize step, its cache dir a placeholder.

    A step partitioned by drops contributes every drop's cache (a list, flattened with
    token-proportional weights when training starts); a string is a fixed cache path.
    """
    from levanter.data.text import UrlDatasetSourceConfig

    if isinstance(step, str):
        return UrlDatasetSourceConfig(cache_dir=InputName.hardcoded(step), train_urls=[], validation_urls=[])
    tokenize_step = step if isinstance(step, ExecutorStep) else step.step
    if isinstance(step, ExecutorStep):
        cache_dir = step.partitions() if step.partitioned_by is not None else output_path_of(step)
    else:
        cache_dir = step
    config = tokenize_step.config if tokenize_step is not None else None
    if not isinstance(config, TokenizeConfig) or tokenize_step.partitioned_by is not None:
        # A partitioned cache's documents are per partition: the caches alone carry the version.
        return UrlDatasetSourceConfig(cache_dir=cache_dir, train_urls=[], validation_urls=[])
    return UrlDatasetSourceConfig(
        cache_dir=cache_dir,
        train_urls=_urls(config.train_paths) if include_raw_paths else [],
        validation_urls=_urls(config.validation_paths) if include_raw_paths else [],
        format=config.format if config.format is not None else _text_format(),
    )


def _urls(paths: Any) -> Any:
    """A ``versioned([...])`` list stays versioned (it is in Marin's version as it is); else a list."""
    if isinstance(paths, VersionedValue):
        return paths
    return list(paths or [])


def _text_format() -> Any:
    from levanter.data.text import TextLmDatasetFormat

    return TextLmDatasetFormat()


def tokenizer_of(step: ExecutorStep | InputName | str) -> Any:
    """The (versioned) tokenizer of a tokenize step; ValueError when ``step`` is not one."""
    tokenize_step = step if isinstance(step, ExecutorStep) else getattr(step, "step", None)
    config = getattr(tokenize_step, "config", None)
    if not isinstance(config, TokenizeConfigBase) or getattr(config, "tokenizer", None) is None:
        raise ValueError(f"could not determine the tokenizer of {step!r}: not a tokenize step")
    return config.tokenizer


def lm_mixture_data_config(
    components: Mapping[str, ExecutorStep | InputName | str],
    weights: Mapping[str, float],
    *,
    shuffle: bool | int = True,
    missing_weights_are_validation: bool = True,
    include_raw_paths: bool = True,
    permutation_type: str | None = None,
) -> Any:
    """Levanter's ``LMMixtureDatasetConfig`` over tokenize steps (cache dirs stay placeholders until
    the training step runs). Components without a weight are validation-only (weight 0).
    ``permutation_type`` (``"feistel"`` or ``"linear"``) applies when shuffling (default feistel)."""
    from levanter.data.text import LMMixtureDatasetConfig

    unknown = set(weights) - set(components)
    if unknown:
        raise ValueError(f"weights for unknown components: {sorted(unknown)}")
    if not components:
        raise ValueError("a mixture needs at least one component")
    if not any(float(unwrap_versioned_value(w)) > 0 for w in weights.values()):
        raise ValueError("at least one component needs a positive weight")
    full_weights = dict(weights)
    if missing_weights_are_validation:
        full_weights.update({name: 0.0 for name in components if name not in weights})
    tokenizer = None  # fixed cache paths only: read from their ledgers when training starts
    for step in components.values():
        try:
            tokenizer = tokenizer_of(step)
            break
        except ValueError:
            continue
    return LMMixtureDatasetConfig(
        configs={name: step_to_lm_mixture_component(step, include_raw_paths) for name, step in components.items()},
        train_weights=full_weights,
        tokenizer=tokenizer,
        cache_dir=None,
        shuffle=shuffle,
        permutation_type=(permutation_type or "feistel") if shuffle else None,
    )


def lm_data_config(
    training_set: ExecutorStep | InputName,
    validation_sets: Mapping[str, ExecutorStep | InputName] | None = None,
    shuffle: bool | int = True,
    permutation_type: str | None = None,
) -> Any:
    """One tokenized training set (weight 1, named after its step) plus validation-only sets."""
    validation_sets = dict(validation_sets or {})
    step = training_set if isinstance(training_set, ExecutorStep) else training_set.step
    if step is None:
        raise ValueError("lm_data_config needs a tokenize step or an InputName of one, not a hardcoded path")
    train_name = os.path.basename(step.name)
    if train_name in validation_sets:
        raise ValueError(f"training set name {train_name!r} is also a validation set name")
    return lm_mixture_data_config(
        {train_name: training_set, **validation_sets},
        {train_name: 1.0},
        shuffle=shuffle,
        permutation_type=permutation_type,
    )


def add_validation_sets_to_mixture(config: Any, validation_sets: Mapping[str, ExecutorStep | InputName]) -> Any:
    """Marin's: ``config`` (an ``LMMixtureDatasetConfig``) with ``validation_sets`` added as
    weight-0 components (names it already has are kept as they are)."""
    if not isinstance(config.train_weights, Mapping):
        raise ValueError("add_validation_sets_to_mixture needs a mixture with fixed weights (a dict), not a schedule")
    new = {name: step for name, step in validation_sets.items() if name not in config.configs}
    configs = {**config.configs, **{name: step_to_lm_mixture_component(step, True) for name, step in new.items()}}
    weights = {**config.train_weights, **{name: 0.0 for name in new}}
    return dataclasses.replace(config, configs=configs, train_weights=weights)


def mixture_for_evaluation(inputs: Mapping[str, ExecutorStep | InputName]) -> Any:
    """Marin's: a mixture of ``inputs`` for evaluation only (every weight 0, no shuffling)."""
    from levanter.data.text import LMMixtureDatasetConfig

    if not inputs:
        raise ValueError("mixture_for_evaluation needs at least one tokenized dataset")
    tokenizer = None
    for step in inputs.values():
        try:
            tokenizer = tokenizer_of(step)
            break
        except ValueError:
            continue
    return LMMixtureDatasetConfig(
        configs={name: step_to_lm_mixture_component(step, True) for name, step in inputs.items()},
        train_weights={name: 0.0 for name in inputs},
        tokenizer=tokenizer,
        cache_dir=None,
        shuffle=False,
    )


@functools.cache
def get_vocab_size_for_tokenizer(tokenizer: str) -> int:
    """Marin's: the vocabulary size of ``tokenizer``: a local or remote (``gs://``) tokenizer folder, or
    a hub name (the prefix's hub mirror, the hub, or the local HF cache; see ``resolve_tokenizer``)."""
    from marin_assets.processing.tokenize.cache_encoding import load_hf_tokenizer

    return len(load_hf_tokenizer(resolve_tokenizer(tokenizer)))
