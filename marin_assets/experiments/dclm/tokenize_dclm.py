"""Marin's older ``experiments/dclm/tokenize_dclm.py``: the DCLM mixture over the llama3 caches of
:mod:`marin_assets.experiments.pretraining_datasets` (the same steps as ``pretraining_datasets.dclm``), with
Marin's ``permutation_type`` variants and the ``_wrong`` components kept for reproducibility."""

from levanter.data.text import TextLmDatasetFormat

from marin_assets.experiments.defaults import default_tokenize
from marin_assets.experiments.marin_models import llama3_tokenizer
from marin_assets.experiments.pretraining_datasets import (
    dclm_baseline_tokenized_llama3,
    dclm_baseline_wrong,
    proofpile_2,
    proofpile_2_tokenized_llama3,
    starcoderdata,
    starcoderdata_tokenized_llama3,
)
from marin_assets.experiments.pretraining_datasets.dclm import DCLM_BASELINE_ONLY_MIXTURE, DCLM_MIXTURE_WEIGHTS
from marin_assets.processing.tokenize.data_configs import lm_mixture_data_config

dclm_components_llama3 = {
    "dclm_baseline": dclm_baseline_tokenized_llama3,
    "starcoderdata": starcoderdata_tokenized_llama3,
    "proofpile_2": proofpile_2_tokenized_llama3,
}
dclm_mixture_config_llama3_old = lm_mixture_data_config(
    components=dclm_components_llama3, weights=DCLM_MIXTURE_WEIGHTS, permutation_type="linear"
)
dclm_mixture_config_llama3 = lm_mixture_data_config(
    components=dclm_components_llama3, weights=DCLM_MIXTURE_WEIGHTS, permutation_type="feistel"
)

# Marin found the us-central2 DCLM baseline partial on 2025-02-11; kept for reproducing old runs only.
dclm_components_llama3_wrong = {
    "dclm_baseline": default_tokenize(
        name="dclm_baseline", dataset=dclm_baseline_wrong, tokenizer=llama3_tokenizer
    ).with_output_path("tokenized/dclm_baseline-0206f1_WRONG_20250211/"),
    "starcoderdata": default_tokenize(
        name="starcoderdata",
        dataset=starcoderdata,
        tokenizer=llama3_tokenizer,
        format=TextLmDatasetFormat(text_key="content"),
    ),
    "proofpile_2": default_tokenize(name="proofpile_2", dataset=proofpile_2, tokenizer=llama3_tokenizer),
}
dclm_mixture_config_llama3_wrong = lm_mixture_data_config(
    components=dclm_components_llama3_wrong, weights=DCLM_MIXTURE_WEIGHTS, permutation_type="linear"
)

__all__ = [
    "DCLM_BASELINE_ONLY_MIXTURE",
    "DCLM_MIXTURE_WEIGHTS",
    "dclm_components_llama3",
    "dclm_components_llama3_wrong",
    "dclm_mixture_config_llama3",
    "dclm_mixture_config_llama3_old",
    "dclm_mixture_config_llama3_wrong",
]
