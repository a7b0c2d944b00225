"""Marin's DCLM mixture shape (``experiments/dclm/exp433_dclm_run.py``): tokenize two sources, mix
them with ``lm_mixture_data_config``, train ``llama_nano`` on the mixture and evaluate it with
``default_eval`` -- on CPU, from local folders and a local tokenizer directory."""

from experiments.defaults import default_tokenize, default_train
from experiments.evals.evals import default_eval
from experiments.evals.task_configs import LOCAL_TASKS
from experiments.llama import llama_nano
from experiments.simple_train_config import SimpleTrainConfig
from marin.execution.executor import executor_main, versioned
from marin.processing.tokenize import lm_mixture_data_config
from marin.resources import CpuOnlyConfig

web_tokenized = default_tokenize(name="web", dataset="local_docs/web", tokenizer="local_tokenizer")
code_tokenized = default_tokenize(
    name="code", dataset="local_docs/code", tokenizer="local_tokenizer", sample_count=versioned(60)
)

mixture_config = lm_mixture_data_config(
    components={"web": web_tokenized, "code": code_tokenized},
    weights={"web": 0.7, "code": 0.3},
)

nano_train_config = SimpleTrainConfig(
    resources=CpuOnlyConfig(num_cpus=1),
    train_batch_size=4,
    num_train_steps=4,
    learning_rate=3e-3,
    weight_decay=0.1,
    beta2=0.98,
    max_grad_norm=0.5,
    steps_per_eval=2,
    max_eval_batches=1,
    train_seq_len=64,
)

mixture_model = default_train(
    name="mixture-llama-nano",
    tokenized=mixture_config,
    model_config=versioned(llama_nano),
    train_config=nano_train_config,
    eval_harness_tasks=[],
    use_default_validation=False,
)

mixture_eval = default_eval(
    mixture_model, resource_config=CpuOnlyConfig(num_cpus=1), evals=[LOCAL_TASKS[0]], max_eval_instances=4
)

if __name__ == "__main__":
    executor_main(steps=[mixture_model, mixture_eval])
