"""Marin's ``default_lm_log_probs`` on a local HF model and a tokenized cache with a validation split."""

from experiments.defaults import default_tokenize
from experiments.llama import llama_nano
from marin.evaluation.log_probs import default_lm_log_probs
from marin.execution.executor import executor_main
from marin.processing.tokenize.data_configs import mixture_for_evaluation

held_out = default_tokenize("held-out", "local_docs/web", tokenizer="local_tokenizer", is_validation=True)
data = mixture_for_evaluation({"held-out": held_out})
log_probs = default_lm_log_probs("local_model", model=llama_nano, data=data, checkpoint_is_hf=True, name="local-model")

if __name__ == "__main__":
    executor_main(steps=[log_probs])
