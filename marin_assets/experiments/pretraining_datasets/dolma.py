"""Marin's ``experiments/pretraining_datasets/dolma.py``: Dolma 1.7 (one download, one cache per split).

Marin's split list, file globs, mixture weights and the llama3 output-path overrides (its caches from before
a hashing change), so ``tokenize_dolma()`` steps land where Marin's do. The train paths are Marin's fixed
``raw/dolma/v1.7/...`` (relative to the prefix), as in its registry.
"""

from __future__ import annotations

import os.path

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.step import ExecutorStep, this_output_path, versioned
from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize

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

_DOLMA_V1_7_PATH = "raw/dolma/v1.7"

DOLMA_OLMO_MIXTURE_WEIGHTS = {
    "dolma/algebraic-stack": 12.6,
    "dolma/arxiv": 28.0,
    "dolma/gutenberg": 5.3,
    "dolma/c4": 124.95,
    "dolma/cc": 597.75,
    "dolma/cc-news": 14.3,
    "dolma/falcon": 456.4,
    "dolma/megawika": 4.6,
    "dolma/open-web-math": 12.6,
    "dolma/pes2o": 57.2,
    "dolma/reddit": 79.9,
    "dolma/stackexchange": 19.6,
    "dolma/starcoder": 263.8,
    "dolma/flan": 16.5,
    "dolma/wiki": 7.4,
}

DOLMA_DATASETS = {
    "algebraic-stack": ["algebraic-stack-train-{0000..0015}.json.gz"],
    "arxiv": ["arxiv-{0000..0099}.json.gz"],
    "gutenberg": ["books-{0000..0002}.json.gz"],
    "c4": ["c4-{0000..0170}.json.gz"],
    "cc": [
        "cc_en_head-{0000..0274}.json.gz",
        "cc_en_middle-{0000..0238}.json.gz",
        "cc_en_middle-{0240..0379}.json.gz",
        "cc_en_tail-{0000..0152}.json.gz",
        "cc_en_tail-{0154..0444}.json.gz",
    ],
    "cc-news": [
        "cc_news_head-{0000..0004}.json.gz",
        "cc_news_middle-{0000..0002}.json.gz",
        "cc_news_tail-0000.json.gz",
    ],
    "falcon": ["falcon-{0000..0499}.json.gz"],
    "megawika": ["megawika-{0000..0261}.json.gz"],
    "open-web-math": ["open-web-math-train-{0000..0012}.json.gz"],
    "pes2o": ["pes2o-{0000..0025}.json.gz"],
    "reddit": ["reddit-{0000..0077}.json.gz"],
    "stackexchange": ["stackexchange-{0000..0025}.json.gz"],
    "starcoder": ["starcoder-{0000..0048}.json.gz"],
    "flan": ["tulu_flan-{0000..0065}.json.gz"],
    "wiki": ["wiki-{0000..0001}.json.gz"],
}

DOLMA_LLAMA3_OVERRIDES = {
    "c4": "tokenized/dolma/c4-e0e5ec",
    "cc": "tokenized/dolma/cc-74b017",
    "cc-news": "tokenized/dolma/cc-news-625d3e",
    "falcon": "tokenized/dolma/falcon-da8fd0",
    "flan": "tokenized/dolma/flan-a99cb2",
    "gutenberg": "tokenized/dolma/gutenberg-f9eb99",
    "reddit": "tokenized/dolma/reddit-62a64a",
    "starcoder": "tokenized/dolma/starcoder-8b6089",
    "algebraic-stack": "tokenized/dolma/algebraic-stack-cc00cf",
    "arxiv": "tokenized/dolma/arxiv-07a51f",
    "megawika": "tokenized/dolma/megawika-34abf2",
    "open-web-math": "tokenized/dolma/open-web-math-79823d",
    "pes2o": "tokenized/dolma/pes2o-538363",
    "stackexchange": "tokenized/dolma/stackexchange-adfc49",
    "wiki": "tokenized/dolma/wiki-212315",
}


def tokenize_dolma(*, tokenizer: str | None = None) -> dict[str, ExecutorStep]:
    """One ``tokenized/dolma/<split>`` step per split, keyed ``dolma/<split>`` (Marin's)."""
    from marin_assets.experiments.marin_models import llama3_tokenizer

    tokenizer = tokenizer or llama3_tokenizer
    steps: dict[str, ExecutorStep] = {}
    for dataset, files in DOLMA_DATASETS.items():
        step = ExecutorStep(
            name=os.path.join("tokenized", "dolma", dataset),
            fn=tokenize,
            config=TokenizeConfig(
                train_paths=[os.path.join(_DOLMA_V1_7_PATH, file) for file in files],
                # Marin versions these two fields; the engine unwraps them when the step runs.
                validation_paths=versioned([]),  # type: ignore[arg-type]
                cache_path=this_output_path(),
                tokenizer=versioned(tokenizer),  # type: ignore[arg-type]
            ),
        )
        if tokenizer == llama3_tokenizer and dataset in DOLMA_LLAMA3_OVERRIDES:
            step = step.with_output_path(DOLMA_LLAMA3_OVERRIDES[dataset])
        steps[os.path.join("dolma", dataset)] = step
    return steps
