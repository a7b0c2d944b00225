"""Marin's ``experiments/llama.py``: Llama model sizes as Levanter ``LlamaConfig`` objects.

Same names and shapes as Marin's (``llama_nano`` ... ``llama_1_4b``, ``llama_1_9b``, ``llama_3_5b``,
``llama_8b`` ... ``llama_70b``, the 8B and larger with Llama 3 rotary embeddings), and Levanter's
``LlamaConfig`` under this module's name, as Marin's module has it. The configs are built on
first access (module ``__getattr__``) because importing Levanter takes seconds; ``from
marin_assets.experiments.llama import llama_nano`` works as in Marin. Marin's preset training
configs (``llama_150m_train_config``, ``llama_300m_train_config``, ``llama_1_4b_train_config``,
``llama_8b_train_config``: TPU resources, batch, steps, learning rate, weight decay) are here too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from marin_assets.experiments.marin_models import llama3_tokenizer, llama3_tokenizer_vocab_size
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_resources import ResourceConfig

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
    "llama_1_9b": (4096, 2048, 7168, 16, 8, 24),
    "llama_3_5b": (4096, 2560, 8960, 20, 10, 32),
    "llama_8b": (4096, 4096, 14336, 32, 8, 32),
    "llama_13b": (4096, 5120, 13824, 40, 8, 40),
    "llama_24b": (4096, 6144, 16384, 48, 16, 56),
    "llama_32b": (4096, 5120, 27648, 40, 8, 64),
    "llama_56b": (4096, 8192, 28672, 64, 8, 64),
    "llama_70b": (4096, 8192, 28672, 64, 8, 80),
}
# Marin gives these Llama 3 rotary embeddings (the smaller ones keep Levanter's default).
_LLAMA3_ROPE = frozenset({"llama_8b", "llama_13b", "llama_24b", "llama_32b", "llama_56b", "llama_70b"})

# Marin's presets (tokens per run in the comments: batch x seq_len x steps).
llama_150m_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-32"),
    train_batch_size=512,
    num_train_steps=20000,  # ~20B tokens
    learning_rate=3e-3,
    weight_decay=0.1,
)
llama_300m_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-64"),
    train_batch_size=1024,
    num_train_steps=18000,  # ~18B tokens
    learning_rate=3e-3,
    weight_decay=0.1,
)
llama_1_4b_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-128"),
    train_batch_size=1024,
    num_train_steps=10000,  # ~42B tokens
    learning_rate=3e-4,
    weight_decay=0.1,
)
llama_8b_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-128", slice_count=4),
    train_batch_size=1024,
    num_train_steps=40000,  # ~167B tokens
    learning_rate=2e-3,
    weight_decay=0.05,
)

__all__ = [
    "LlamaConfig",  # noqa: F822 - resolved by __getattr__ (Levanter imports on first use)
    "compute_num_parameters",
    "llama3_tokenizer",
    "llama3_tokenizer_vocab_size",
    "llama_150m_train_config",
    "llama_300m_train_config",
    "llama_1_4b_train_config",
    "llama_8b_train_config",
    *_SHAPES,
]


@cache
def _model(name: str) -> Any:
    from levanter.models.llama import LlamaConfig

    seq_len, hidden, intermediate, heads, kv_heads, layers = _SHAPES[name]
    extra: dict[str, Any] = {}
    if name in _LLAMA3_ROPE:
        from levanter.layers.rotary import Llama3RotaryEmbeddingsConfig

        extra["rope"] = Llama3RotaryEmbeddingsConfig()
    return LlamaConfig(
        seq_len=seq_len,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        num_heads=heads,
        num_kv_heads=kv_heads,
        num_layers=layers,
        **extra,
    )


def __getattr__(name: str) -> Any:
    if name in _SHAPES:
        return _model(name)
    if name == "LlamaConfig":  # Marin's module imports it from Levanter; scripts import it from here
        from levanter.models.llama import LlamaConfig

        return LlamaConfig
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
