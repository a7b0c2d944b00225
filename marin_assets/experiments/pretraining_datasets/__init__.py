"""Marin's ``experiments.pretraining_datasets``: canonical raw and tokenized pretraining datasets.

``DATASETS`` (family -> subsets, download, tokenize function), ``simple_downloads`` / ``simple_tokenized``
(:mod:`.simple`), Dolma 1.7 (:mod:`.dolma`), the DCLM mixture (:mod:`.dclm`), and the older module-level names
(``dclm_baseline``, ``fineweb_edu``, ``starcoderdata``, ``proofpile_2``: the raw downloads) that earlier
scripts import. Marin's other families (dolmino, nemotron, ...) are not built in: copy Marin's module into the
team's ``experiments/pretraining_datasets/`` (a team package wins, module by module).
"""

from marin_assets.experiments.pretraining_datasets.dolma import (
    DOLMA_DATASETS,
    DOLMA_LLAMA3_OVERRIDES,
    DOLMA_OLMO_MIXTURE_WEIGHTS,
    tokenize_dolma,
)
from marin_assets.experiments.pretraining_datasets.dolma import downloads as dolma_downloads
from marin_assets.experiments.pretraining_datasets.simple import downloads as simple_downloads
from marin_assets.experiments.pretraining_datasets.simple import tokenized as simple_tokenized

# The module-level names of Marin's older single-file registry (``experiments/pretraining_datasets.py``).
dclm_baseline = simple_downloads["dclm_baseline"]
dclm_baseline_wrong = simple_downloads["dclm_baseline_wrong"]
fineweb_edu = simple_downloads["fineweb_edu"]
starcoderdata = simple_downloads["starcoderdata"]
proofpile_2 = simple_downloads["proofpile_2"]
dclm_baseline_tokenized_llama3 = simple_tokenized["dclm_baseline"]
starcoderdata_tokenized_llama3 = simple_tokenized["starcoderdata"]
proofpile_2_tokenized_llama3 = simple_tokenized["proofpile_2"]
fineweb_edu_tokenized = simple_tokenized["fineweb_edu"]

DATASETS = {
    **{
        key: {
            "subsets": ["all"],
            "download": simple_downloads[key],
            "tokenize_fn": (lambda key=key: {f"{key}/all": simple_tokenized[key]}),
        }
        for key in ("dclm_baseline", "starcoderdata", "proofpile_2", "slimpajama_6b", "fineweb_edu")
    },
    "dolma": {"subsets": list(DOLMA_DATASETS), "download": dolma_downloads["dolma"], "tokenize_fn": tokenize_dolma},
}

__all__ = [
    "DATASETS",
    "DOLMA_DATASETS",
    "DOLMA_LLAMA3_OVERRIDES",
    "DOLMA_OLMO_MIXTURE_WEIGHTS",
    "dclm_baseline",
    "dclm_baseline_tokenized_llama3",
    "dclm_baseline_wrong",
    "fineweb_edu",
    "fineweb_edu_tokenized",
    "proofpile_2",
    "proofpile_2_tokenized_llama3",
    "simple_downloads",
    "simple_tokenized",
    "starcoderdata",
    "starcoderdata_tokenized_llama3",
    "tokenize_dolma",
]
