"""DOLMA 1.7: one download, one tokenized cache per split."""

import os.path

from marin.download.huggingface.download_hf import DownloadConfig, download_hf
from marin.execution.executor import ExecutorStep, this_output_path, versioned
from marin.processing.tokenize import TokenizeConfig, tokenize

from experiments.llama import llama3_tokenizer

DOLMA_DATASETS = {
    "algebraic-stack": ["algebraic-stack-train-{0000..0015}.json.gz"],
    "arxiv": ["arxiv-{0000..0099}.json.gz"],
    "wiki": ["wiki-{0000..0001}.json.gz"],
}

DOLMA_OLMO_MIXTURE_WEIGHTS = {"dolma/algebraic-stack": 12.6, "dolma/arxiv": 28.0, "dolma/wiki": 3.7}

DOLMA_LLAMA3_OVERRIDES = {"wiki": "tokenized/dolma/wiki-3a3a5b"}

downloads = {
    "dolma": ExecutorStep(
        name="raw/dolma",
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id="allenai/dolma",
            revision="7f48140",
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
        ),
        override_output_path="raw/dolma",
    )
}


def tokenize_dolma(*, tokenizer: str | None = None) -> dict[str, ExecutorStep]:
    tokenizer = tokenizer or llama3_tokenizer
    steps = {}
    for split, files in DOLMA_DATASETS.items():
        step = ExecutorStep(
            name=os.path.join("tokenized", "dolma", split),
            fn=tokenize,
            config=TokenizeConfig(
                train_paths=[downloads["dolma"].cd(f"7f48140/{f}") for f in files],
                validation_paths=versioned([]),
                cache_path=this_output_path(),
                tokenizer=versioned(tokenizer),
            ),
        )
        if tokenizer == llama3_tokenizer and split in DOLMA_LLAMA3_OVERRIDES:
            step = step.with_output_path(DOLMA_LLAMA3_OVERRIDES[split])
        steps[f"dolma/{split}"] = step
    return steps
