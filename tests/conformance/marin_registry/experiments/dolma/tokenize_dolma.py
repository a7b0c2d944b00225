"""Dolma tokenization (the older registry module)."""

from experiments.pretraining_datasets.dolma import DOLMA_OLMO_MIXTURE_WEIGHTS, tokenize_dolma

dolma_llama3_tokenized = tokenize_dolma()

__all__ = ["DOLMA_OLMO_MIXTURE_WEIGHTS", "dolma_llama3_tokenized", "tokenize_dolma"]
