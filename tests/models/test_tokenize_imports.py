"""The tokenize package: Marin's names as before, and cache-writer workers that start light."""

from __future__ import annotations

import importlib
import subprocess
import sys

import marin_assets.processing.tokenize as package


def test_marin_names_resolve_to_what_they_were() -> None:
    importlib.import_module("marin_assets.processing.tokenize.tokenize")  # binds the submodule name
    from marin_assets.processing.tokenize import TokenizeConfig, lm_mixture_data_config, tokenize
    from marin_assets.processing.tokenize.data_configs import lm_mixture_data_config as from_data_configs
    from marin_assets.processing.tokenize.tokenize import TokenizeConfig as from_module
    from marin_assets.processing.tokenize.tokenize import tokenize as step_function

    assert tokenize is step_function and package.tokenize is step_function
    assert TokenizeConfig is from_module and lm_mixture_data_config is from_data_configs
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert set(package.__all__) <= set(dir(package))


def test_worker_module_does_not_import_the_engine() -> None:
    """What a cache-writer worker imports (``cache_encoding``) leaves the step engine and fsspec out."""
    code = (
        "import sys, marin_assets.processing.tokenize.cache_encoding as ce; "
        "print(sorted(m for m in sys.modules if m.startswith(('marin_assets.execution', 'marin_assets.core', 'fsspec'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
