"""The DCLM baseline mixture (the older registry module)."""

from marin.processing.tokenize.data_configs import lm_mixture_data_config

from experiments.pretraining_datasets import simple_tokenized

dclm_components_llama3 = {
    "dclm_baseline": simple_tokenized["dclm_baseline"],
    "starcoderdata": simple_tokenized["starcoderdata"],
}

DCLM_MIXTURE_WEIGHTS = {"dclm_baseline": 3.8, "starcoderdata": 0.25}

dclm_mixture_config_llama3 = lm_mixture_data_config(components=dclm_components_llama3, weights=DCLM_MIXTURE_WEIGHTS)
