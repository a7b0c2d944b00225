"""Marin's ``marin.processing.tokenize`` package: ``TokenizeConfig`` and the ``tokenize`` step function
(``tokenize``), data mixtures (``data_configs``). Everything resolves offline (see ``tokenize.tokenize``).

The names are imported on first use (PEP 562): the cache writer's worker processes import only
``cache_encoding`` from this package, not the step engine that ``tokenize`` and ``data_configs`` need.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

_SOURCES = {
    "TokenizerStep": "data_configs",
    "add_validation_sets_to_mixture": "data_configs",
    "get_vocab_size_for_tokenizer": "data_configs",
    "lm_data_config": "data_configs",
    "lm_mixture_data_config": "data_configs",
    "mixture_for_evaluation": "data_configs",
    "step_to_lm_mixture_component": "data_configs",
    "tokenizer_of": "data_configs",
    "OFFLINE_HINT": "tokenize",
    "HfDatasetSpec": "tokenize",
    "HfTokenizeConfig": "tokenize",
    "TokenizeConfig": "tokenize",
    "TokenizeConfigBase": "tokenize",
    "cache_split_stats": "tokenize",
    "hf_dataset_records": "tokenize",
    "resolve_tokenizer": "tokenize",
    "tokenize": "tokenize",
}

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

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package, whose ``tokenize`` stays the step function (as when the names were imported eagerly).

    Importing the submodule ``tokenize`` makes the import system bind the package's ``tokenize`` to
    that module; the property keeps answering with the function (the submodule is in ``sys.modules``).
    """

    @property
    def tokenize(self) -> Any:
        return importlib.import_module(f"{__name__}.tokenize").tokenize

    @tokenize.setter
    def tokenize(self, value: Any) -> None:
        pass  # the import system binding the submodule


sys.modules[__name__].__class__ = _Package
