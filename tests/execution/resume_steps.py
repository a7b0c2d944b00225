"""A small training graph for the executor-level resume test (importable from a subprocess).

``python -m tests.execution.resume_steps <executor_main args...>``: sample documents, tokenizer,
tokenized cache and a 120-step Levanter run checkpointing every 5 steps.
"""

from __future__ import annotations

import sys

from marin_assets.execution import ExecutorStep, executor_main
from marin_assets.experiments.defaults import default_tokenize, default_train
from marin_assets.experiments.sample_documents import sample_documents_step
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.processing.tokenize.train_tokenizer import default_tokenizer
from marin_assets.training.train_config import LlamaModelConfig
from marin_resources.resource_config import CpuOnlyConfig


def steps() -> list[ExecutorStep]:
    docs = sample_documents_step(max_bytes=400_000)
    tokenizer = default_tokenizer("resume-test", docs / "train", vocab_size=1024)
    tokenized = default_tokenize("resume-test", docs / "train", tokenizer, validation=docs / "validation")
    train = default_train(
        "resume-test",
        tokenized,
        LlamaModelConfig(seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, num_kv_heads=2),
        SimpleTrainConfig(
            resources=CpuOnlyConfig(num_cpus=1),
            train_batch_size=8,
            num_train_steps=120,
            learning_rate=3e-3,
            weight_decay=0.0,
            warmup=0.05,
            min_lr_ratio=0.1,
            steps_per_export=5,
            steps_per_eval=1000,
            max_eval_batches=1,
        ),
        eval_harness_tasks=(),  # Marin's default CORE_TASKS have no local data here
    )
    return [docs, tokenizer, tokenized, train]


if __name__ == "__main__":
    executor_main(steps(), argv=sys.argv[1:])
