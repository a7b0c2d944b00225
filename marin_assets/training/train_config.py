"""A Llama model shape that needs no Levanter import (``default_train`` also takes Levanter's configs).

Experiments that must define steps without importing Levanter (the quickstart, the code location)
describe their model with :class:`LlamaModelConfig`; the training subprocess turns it into
Levanter's ``LlamaConfig`` (:func:`marin_assets.training.levanter_config.levanter_model_config`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LlamaModelConfig:
    """A Llama-architecture model (Levanter ``LlamaConfig`` names); defaults: the tiny CPU model (~0.66 M
    parameters)."""

    seq_len: int = 128
    hidden_dim: int = 64
    intermediate_dim: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    tie_word_embeddings: bool = False


TINY_LLAMA = LlamaModelConfig()
