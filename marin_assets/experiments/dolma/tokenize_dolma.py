"""Marin's older ``experiments/dolma/tokenize_dolma.py``: Dolma 1.7's llama3 caches and mixture weights
(the steps of :func:`marin_assets.experiments.pretraining_datasets.dolma.tokenize_dolma`)."""

from marin_assets.experiments.pretraining_datasets.dolma import DOLMA_OLMO_MIXTURE_WEIGHTS, tokenize_dolma

dolma_llama3_tokenized = tokenize_dolma()

__all__ = ["DOLMA_OLMO_MIXTURE_WEIGHTS", "dolma_llama3_tokenized", "tokenize_dolma"]
