"""Marin's ``experiments/midtraining_datasets.py``: FineMath (the 3+ subset) and its llama3 cache.

Same step names, revision and pinned cache path as Marin's; running needs the Hugging Face dataset.
"""

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.step import ExecutorStep, this_output_path
from marin_assets.experiments.defaults import default_tokenize
from marin_assets.experiments.marin_models import llama3_tokenizer

finemath_commit_hash = "8f233cf"
finemath = ExecutorStep(
    name="raw/finemath",
    fn=download_hf,
    config=DownloadConfig(
        hf_dataset_id="HuggingFaceTB/finemath",
        revision=finemath_commit_hash,
        gcs_output_path=this_output_path(),
        wait_for_completion=True,
    ),
)

finemath_3_plus = finemath.cd("finemath-3plus")
finemath_3_plus_tokenized = default_tokenize(
    name="finemath_3_plus", dataset=finemath_3_plus, tokenizer=llama3_tokenizer
).with_output_path("tokenized/finemath_3_plus-a26b0f/")

# MegaMath's split sizes in teratokens (Marin's mixture weights for its mid-training runs).
megamath_token_counts = {
    "megamath/web": 0.2639,
    "megamath/web_pro": 0.0151,
    "megamath/text_code_block": 0.0503,
    "megamath/translated_code": 0.0072,
    "megamath/qa": 0.0070,
}
