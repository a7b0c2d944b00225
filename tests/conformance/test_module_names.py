"""Marin's module paths under the import mapping, beyond ``marin.execution.executor``: scripts import
``marin.processing.tokenize.data_configs`` and ``marin.processing.tokenize.tokenize`` directly."""

from __future__ import annotations

import importlib


def test_processing_tokenize_submodules_have_marins_names():
    package = importlib.import_module("marin_assets.processing.tokenize")
    data_configs = importlib.import_module("marin_assets.processing.tokenize.data_configs")
    module = importlib.import_module("marin_assets.processing.tokenize.tokenize")
    for name in ("lm_data_config", "lm_mixture_data_config", "TokenizerStep", "step_to_lm_mixture_component"):
        assert getattr(data_configs, name) is getattr(package, name), name
    for name in ("TokenizeConfig", "HfDatasetSpec", "tokenize"):
        assert getattr(module, name) is getattr(package, name), name
    assert callable(package.tokenize) and package.tokenize.__name__ == "tokenize"  # the function, not the module
