"""Marin's ``experiments/pretraining_datasets/dclm.py``: the DCLM baseline mixture (llama3 caches).

``dclm_components_llama3`` (dclm-baseline, starcoderdata, proof-pile-2), ``DCLM_MIXTURE_WEIGHTS`` and
``dclm_mixture_config_llama3``, as Marin's experiments import them; ``DCLM_BASELINE_ONLY_MIXTURE`` weighs
only the baseline. Running the caches needs the downloads (see :mod:`.simple`).
"""

from __future__ import annotations

from marin_assets.experiments.pretraining_datasets.simple import downloads, tokenized
from marin_assets.processing.tokenize.data_configs import lm_mixture_data_config

DCLM_MIXTURE_WEIGHTS = {
    # token counts with the neox tokenizer
    "dclm_baseline": 3.8,
    "starcoderdata": 0.25,
    "proofpile_2": 0.055,
}

DCLM_BASELINE_ONLY_MIXTURE = {"dclm_baseline": 3.8, "starcoderdata": 0, "proofpile_2": 0}

dclm_components_llama3 = {
    "dclm_baseline": tokenized["dclm_baseline"],
    "starcoderdata": tokenized["starcoderdata"],
    "proofpile_2": tokenized["proofpile_2"],
}
dclm_mixture_config_llama3 = lm_mixture_data_config(components=dclm_components_llama3, weights=DCLM_MIXTURE_WEIGHTS)

__all__ = [
    "DCLM_BASELINE_ONLY_MIXTURE",
    "DCLM_MIXTURE_WEIGHTS",
    "dclm_components_llama3",
    "dclm_mixture_config_llama3",
    "downloads",
]
