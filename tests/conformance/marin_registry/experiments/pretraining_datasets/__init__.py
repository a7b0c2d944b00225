"""Canonical raw and tokenized pretraining datasets."""

from experiments.pretraining_datasets.dolma import (
    DOLMA_DATASETS,
    DOLMA_LLAMA3_OVERRIDES,
    DOLMA_OLMO_MIXTURE_WEIGHTS,
    tokenize_dolma,
)
from experiments.pretraining_datasets.dolma import downloads as dolma_downloads
from experiments.pretraining_datasets.simple import downloads as simple_downloads
from experiments.pretraining_datasets.simple import tokenized as simple_tokenized

__all__ = ["DATASETS", "DOLMA_DATASETS", "DOLMA_LLAMA3_OVERRIDES", "DOLMA_OLMO_MIXTURE_WEIGHTS", "tokenize_dolma"]

DATASETS = {
    "dclm_baseline": {
        "subsets": ["all"],
        "download": simple_downloads["dclm_baseline"],
        "tokenize_fn": lambda: {"dclm_baseline/all": simple_tokenized["dclm_baseline"]},
    },
    "fineweb_edu": {
        "subsets": ["all"],
        "download": simple_downloads["fineweb_edu"],
        "tokenize_fn": lambda: {"fineweb_edu/all": simple_tokenized["fineweb_edu"]},
    },
    "dolma": {
        "subsets": list(DOLMA_DATASETS.keys()),
        "download": dolma_downloads["dolma"],
        "tokenize_fn": tokenize_dolma,
    },
}
