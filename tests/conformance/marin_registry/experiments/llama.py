"""Llama 3 models from small to large (the Levanter of this project names the context ``seq_len``)."""

from fray.cluster import ResourceConfig
from levanter.models.llama import LlamaConfig

from experiments.simple_train_config import SimpleTrainConfig

llama3_tokenizer = "meta-llama/Meta-Llama-3.1-8B"
llama3_tokenizer_vocab_size = 128_256

llama_nano = LlamaConfig(seq_len=512, hidden_dim=32, intermediate_dim=128, num_heads=2, num_kv_heads=2, num_layers=2)
llama_30m = LlamaConfig(seq_len=1024, hidden_dim=128, intermediate_dim=448, num_heads=2, num_kv_heads=2, num_layers=4)
llama_150m = LlamaConfig(seq_len=1024, hidden_dim=512, intermediate_dim=1792, num_heads=8, num_kv_heads=8, num_layers=6)
llama_1_4b = LlamaConfig(
    seq_len=4096, hidden_dim=2048, intermediate_dim=7168, num_heads=16, num_kv_heads=8, num_layers=16
)

llama_150m_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-32"),
    train_batch_size=512,
    num_train_steps=20000,
    learning_rate=3e-3,
    weight_decay=0.1,
)
llama_1_4b_train_config = SimpleTrainConfig(
    resources=ResourceConfig.with_tpu("v4-128"),
    train_batch_size=1024,
    num_train_steps=10000,
    learning_rate=3e-4,
    weight_decay=0.1,
)
