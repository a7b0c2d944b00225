"""Marin's ``marin.processing.tokenize`` package: ``TokenizeConfig`` and the ``tokenize`` step function
(``tokenize``), data mixtures (``data_configs``). Everything resolves offline (see ``tokenize.tokenize``)."""

from marin_assets.processing.tokenize.data_configs import (
    TokenizerStep,
    add_validation_sets_to_mixture,
    get_vocab_size_for_tokenizer,
    lm_data_config,
    lm_mixture_data_config,
    mixture_for_evaluation,
    step_to_lm_mixture_component,
    tokenizer_of,
)
from marin_assets.processing.tokenize.tokenize import (
    OFFLINE_HINT,
    HfDatasetSpec,
    HfTokenizeConfig,
    TokenizeConfig,
    TokenizeConfigBase,
    cache_split_stats,
    hf_dataset_records,
    resolve_tokenizer,
    tokenize,
)

__all__ = [
    "OFFLINE_HINT",
    "HfDatasetSpec",
    "HfTokenizeConfig",
    "TokenizeConfig",
    "TokenizeConfigBase",
    "TokenizerStep",
    "add_validation_sets_to_mixture",
    "cache_split_stats",
    "get_vocab_size_for_tokenizer",
    "hf_dataset_records",
    "lm_data_config",
    "lm_mixture_data_config",
    "mixture_for_evaluation",
    "resolve_tokenizer",
    "step_to_lm_mixture_component",
    "tokenize",
    "tokenizer_of",
]
