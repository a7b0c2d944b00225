"""Marin's experiments/tutorials/train_tiny_sweep_tpu.py shape on CPU: one ``ResourceConfig.with_cpu()``
train config, a learning-rate x weight-decay sweep over it with ``dataclasses.replace``, one
``default_train`` run per point (its name carries the point: as in Marin, ``default_train`` versions
the model and the data, not the optimizer settings).

Offline: a local document folder and a local tokenizer directory in place of the hub dataset.
"""

import dataclasses

from experiments.defaults import default_tokenize, default_train
from experiments.llama import llama_nano
from experiments.simple_train_config import SimpleTrainConfig
from fray.cluster import ResourceConfig
from marin.execution.executor import executor_main, versioned

RESOURCES = ResourceConfig.with_cpu()

tokenized = default_tokenize(name="sweep_docs", dataset="local_docs", tokenizer="local_tokenizer")

small_train_config = SimpleTrainConfig(
    resources=RESOURCES,
    train_batch_size=4,
    num_train_steps=2,
    learning_rate=6e-4,
    weight_decay=0.1,
    train_seq_len=64,
)

sweep_configs = [
    dataclasses.replace(small_train_config, learning_rate=lr, weight_decay=wd) for lr in [3e-4, 1e-3] for wd in [0.1]
]

runs = []
for config in sweep_configs:
    lr, wd = config.learning_rate, config.weight_decay
    run = default_train(
        name=f"tutorial-cpu-nano-sweep-lr{lr}-wd{wd}",
        tokenized=tokenized,
        model_config=versioned(llama_nano),
        train_config=config,
        tags=["llama", "nano", "tutorial", "sweep"],
        eval_harness_tasks=[],
        use_default_validation=False,
    )
    runs.append(run)

if __name__ == "__main__":
    executor_main(steps=runs)
