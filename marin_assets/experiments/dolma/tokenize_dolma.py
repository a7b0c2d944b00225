"""Marin's older ``experiments/dolma/tokenize_dolma.py``: Dolma 1.7's splits, mixture weights and caches.

Two generations of Marin's names live here, as teams import them:

* ``tokenize_dolma_steps(*, base_path="tokenized/", tokenizer=llama3_tokenizer)`` (Marin's
  ``experiments.dolma.tokenize_dolma``, imported by its ``442_dolma.py``, ``dolma_anneal.py`` and
  ``dolma/utils.py``): one ``<base_path>dolma/<split>`` step per split, keyed ``dolma/<split>``, whose
  versioned train paths are the absolute ``BASE_DIR_DOLMA`` files -- so its hashes are that file's,
  not the newer registry's;
* ``tokenize_dolma`` and ``dolma_llama3_tokenized``: the steps of the newer registry
  (:func:`marin_assets.experiments.pretraining_datasets.dolma.tokenize_dolma`, Marin's caches).
"""

from __future__ import annotations

import os.path

from marin_assets.execution.step import ExecutorStep, this_output_path, versioned
from marin_assets.experiments.marin_models import llama3_tokenizer
from marin_assets.experiments.pretraining_datasets.dolma import (
    DOLMA_DATASETS,
    DOLMA_OLMO_MIXTURE_WEIGHTS,
    tokenize_dolma,
)
from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize

BASE_DIR_DOLMA = "gs://marin-us-central2/raw/dolma/v1.7"


def tokenize_dolma_steps(
    *, base_path: str = "tokenized/", tokenizer: str = llama3_tokenizer
) -> dict[str, ExecutorStep]:
    """Marin's ``tokenize_dolma_steps``: ``{"dolma/<split>": <base_path>dolma/<split> step}``.

    The train files are read from Marin's bucket (``BASE_DIR_DOLMA``); a run without access to it
    fails when the step runs, naming the path -- building, hashing and dry-running need nothing.
    """
    steps: dict[str, ExecutorStep] = {}
    for dataset, files in DOLMA_DATASETS.items():
        steps[os.path.join("dolma", dataset)] = ExecutorStep(
            name=os.path.join(base_path, "dolma", dataset),
            fn=tokenize,
            config=TokenizeConfig(
                # Marin versions these three fields; the engine unwraps them when the step runs.
                train_paths=versioned([f"{BASE_DIR_DOLMA}/{file}" for file in files]),  # type: ignore[arg-type]
                validation_paths=versioned([]),  # type: ignore[arg-type]
                cache_path=this_output_path(),
                tokenizer=versioned(tokenizer),  # type: ignore[arg-type]
            ),
        )
    return steps


dolma_llama3_tokenized = tokenize_dolma()

__all__ = [
    "BASE_DIR_DOLMA",
    "DOLMA_DATASETS",
    "DOLMA_OLMO_MIXTURE_WEIGHTS",
    "dolma_llama3_tokenized",
    "tokenize_dolma",
    "tokenize_dolma_steps",
]
