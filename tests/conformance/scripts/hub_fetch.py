"""A Marin-style script whose dataset, tokenizer and lm-eval task data all come from the Hugging Face
hub by name: ``default_download`` of a dataset revision, ``default_tokenize`` with a hub tokenizer,
``default_eval`` on an lm-eval task whose ``dataset_path`` is a hub dataset."""

import os

from experiments.defaults import default_download, default_tokenize
from experiments.evals.evals import default_eval
from marin.evaluation.evaluation_config import EvalTaskConfig
from marin.execution.executor import executor_main

DATASET = os.environ.get("TINY_DATASET", "tiny-org/tiny-web")

raw = default_download(f"raw/{DATASET.split('/')[-1]}", DATASET, "main", hf_urls_glob=["data/*.jsonl"])
tokenized = default_tokenize(
    "tiny-web",
    raw,
    tokenizer="tiny-org/tiny-tok",
    sample_count=int(os.environ.get("TINY_SAMPLES", "0")) or None,
)
evaluation = default_eval(
    "local_model", evals=[EvalTaskConfig("tiny_hub_mc", 0)], max_eval_instances=int(os.environ.get("TINY_EVAL", "4"))
)

if __name__ == "__main__":
    executor_main(steps=[tokenized, evaluation])
