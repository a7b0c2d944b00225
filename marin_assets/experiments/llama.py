"""Marin's ``experiments/llama.py``: Llama model sizes as Levanter ``LlamaConfig`` objects.

Same names and shapes as Marin's (``llama_nano`` ... ``llama_1_4b``). The configs are built on
first access (module ``__getattr__``) because importing Levanter takes seconds; ``from
marin_assets.experiments.llama import llama_nano`` works as in Marin.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from marin_assets.experiments.marin_models import llama3_tokenizer, llama3_tokenizer_vocab_size

# name: (seq_len, hidden_dim, intermediate_dim, num_heads, num_kv_heads, num_layers)
_SHAPES: dict[str, tuple[int, int, int, int, int, int]] = {
    "llama_nano": (512, 32, 128, 2, 2, 2),
    "llama_30m": (1024, 128, 448, 2, 2, 4),
    "llama_50m": (1024, 192, 448, 2, 2, 4),
    "llama_75m": (1024, 256, 896, 4, 4, 8),
    "llama_150m": (1024, 512, 1792, 8, 8, 6),
    "llama_300m": (1024, 768, 2688, 12, 12, 12),
    "llama_600m": (1024, 1024, 3584, 16, 8, 24),
    "llama_1_4b": (4096, 2048, 7168, 16, 8, 16),
}

__all__ = ["compute_num_parameters", "llama3_tokenizer", "llama3_tokenizer_vocab_size", *_SHAPES]


@cache
def _model(name: str) -> Any:
    from levanter.models.llama import LlamaConfig

    seq_len, hidden, intermediate, heads, kv_heads, layers = _SHAPES[name]
    return LlamaConfig(
        seq_len=seq_len,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        num_heads=heads,
        num_kv_heads=kv_heads,
        num_layers=layers,
    )


def __getattr__(name: str) -> Any:
    if name in _SHAPES:
        return _model(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compute_num_parameters(config: Any, vocab_size: int) -> int:
    """Parameters of a Llama model: embeddings, attention, MLP and norms (Marin's formula)."""
    head_size = config.hidden_dim // config.num_heads
    q_params = config.num_heads * head_size * config.hidden_dim
    kv_params = 2 * config.num_kv_heads * head_size * config.hidden_dim
    o_params = config.num_heads * head_size * config.hidden_dim
    attention = q_params + kv_params + o_params
    mlp = 3 * config.hidden_dim * config.intermediate_dim
    norms = 2 * config.hidden_dim
    embeddings = vocab_size * config.hidden_dim
    lm_head = 0 if getattr(config, "tie_word_embeddings", False) else vocab_size * config.hidden_dim
    return embeddings + config.num_layers * (attention + mlp + norms) + config.hidden_dim + lm_head
