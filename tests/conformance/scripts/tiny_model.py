"""Marin's CPU tutorial shape: tokenize a local dataset folder with a local tokenizer directory,
train ``llama_nano`` on CPU with Levanter (``default_tokenize`` -> ``default_train`` -> ``executor_main``)."""

from experiments.defaults import default_tokenize, default_train
from experiments.llama import llama_nano
from experiments.simple_train_config import SimpleTrainConfig
from levanter.data.text import TextLmDatasetFormat
from marin.execution.executor import executor_main, versioned
from marin.resources import CpuOnlyConfig

tiny_tokenized = default_tokenize(
    name="tiny_docs",
    dataset="local_docs",  # a local folder of jsonl documents (relative to the working directory)
    tokenizer="local_tokenizer",  # a local tokenizer directory
    format=TextLmDatasetFormat(),
    sample_count=versioned(200),
)

nano_train_config = SimpleTrainConfig(
    resources=CpuOnlyConfig(num_cpus=1),
    train_batch_size=4,
    num_train_steps=6,
    learning_rate=6e-4,
    weight_decay=0.1,
    steps_per_eval=3,
    max_eval_batches=2,
    train_seq_len=64,
)

nano_model = default_train(
    name="tiny-llama-nano",
    tokenized=tiny_tokenized,
    model_config=versioned(llama_nano),
    train_config=nano_train_config,
    tags=["llama", "nano", "tiny"],
    eval_harness_tasks=[],
    use_default_validation=False,
)

if __name__ == "__main__":
    executor_main(steps=[nano_model])
