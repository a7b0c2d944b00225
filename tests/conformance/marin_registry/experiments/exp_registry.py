"""A team's experiment on Marin's registries: train on a registry's tokenized dataset and on the DCLM
mixture with the built-in ``default_train``, evaluate with ``default_key_evals`` on a TPU preset, and
download a model and a prebuilt cache (the two the test's loopback hub serves)."""

from fray.cluster import ResourceConfig
from marin.execution.executor import executor_main, versioned

from experiments.dclm.tokenize_dclm import dclm_mixture_config_llama3
from experiments.defaults import default_train
from experiments.evals.evals import default_key_evals
from experiments.evals.resource_configs import SINGLE_TPU_V5p_8_FULL
from experiments.llama import llama_1_4b, llama_1_4b_train_config, llama_nano
from experiments.models import ModelConfig, download_model_step
from experiments.pretraining_datasets import DATASETS
from experiments.pretraining_datasets.simple import tokenized
from experiments.simple_train_config import SimpleTrainConfig
from experiments.speedrun.prebuilt_caches import fineweb_edu_subcache_10M

nano_on_fineweb_edu = default_train(
    name="registry-nano-fineweb-edu",
    tokenized=tokenized["fineweb_edu"],
    model_config=versioned(llama_nano),
    train_config=SimpleTrainConfig(
        resources=ResourceConfig.with_cpu(),
        train_batch_size=versioned(8),
        num_train_steps=versioned(10),
        learning_rate=versioned(1e-3),
    ),
    eval_harness_tasks=(),
)
dclm_1_4b = default_train(
    name="registry-dclm-1.4b",
    tokenized=dclm_mixture_config_llama3,
    model_config=llama_1_4b,
    train_config=llama_1_4b_train_config,
    eval_harness_tasks=(),
)
key_evals = default_key_evals(dclm_1_4b, resource_config=SINGLE_TPU_V5p_8_FULL)
dolma_wiki = DATASETS["dolma"]["tokenize_fn"]()["dolma/wiki"]
tiny_model = download_model_step(ModelConfig(hf_repo_id="tiny-org/tiny-model", hf_revision="main"))

if __name__ == "__main__":
    executor_main(steps=[nano_on_fineweb_edu, dclm_1_4b, *key_evals, dolma_wiki, tiny_model, fineweb_edu_subcache_10M])
