"""Marin's ``experiments/pretraining_datasets/simple.py``: single-corpus downloads and their llama3 caches.

Same step names, Hugging Face ids, revisions, ``override_output_path``s and ``.cd(...)`` sub-paths as Marin's
registry, so the steps hash (and land) where Marin's do. Defining them touches nothing; running one downloads
from the hub (``$HF_ENDPOINT``) or the local Hugging Face cache (``HF_HUB_OFFLINE=1``) and fails, naming the
dataset, where neither has it.
"""

from __future__ import annotations

import os.path
from typing import Any

from levanter.data.text import TextLmDatasetFormat

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.step import ExecutorStep, this_output_path, versioned
from marin_assets.experiments.marin_models import llama3_tokenizer
from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize


def _tokenize_simple(
    name: str,
    raw_dataset: Any,
    tokenizer: str | None = None,
    override_path: str | None = None,
    text_format: TextLmDatasetFormat | None = None,
) -> ExecutorStep:
    """``tokenized/<name>``: the raw dataset's llama3 cache (Marin's helper: tokenizer versioned, no validation)."""
    step = ExecutorStep(
        name=os.path.join("tokenized", name),
        fn=tokenize,
        config=TokenizeConfig(
            train_paths=[raw_dataset],
            # Marin versions these two fields; the engine unwraps them when the step runs.
            validation_paths=versioned([]),  # type: ignore[arg-type]
            cache_path=this_output_path(),
            tokenizer=versioned(tokenizer),  # type: ignore[arg-type]
            format=text_format or TextLmDatasetFormat(),
        ),
    )
    return step.with_output_path(override_path) if override_path is not None else step


def _download(name: str, dataset_id: str, revision: str, override: str, **kwargs: Any) -> ExecutorStep:
    return ExecutorStep(
        name=name,
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=dataset_id,
            revision=revision,
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
            **kwargs,
        ),
        override_output_path=override,
    )


_fineweb_edu = _download("raw/fineweb-edu", "HuggingFaceFW/fineweb-edu", "87f0914", "raw/fineweb-edu-87f0914")

downloads: dict[str, Any] = {
    "fineweb": _download("raw/fineweb", "HuggingFaceFW/fineweb", "cd85054", "raw/fineweb"),
    "fineweb_edu": _fineweb_edu.cd("data"),
    "fineweb_edu_sample_10bt": _fineweb_edu.cd("sample/10BT"),
    "fineweb_edu_sample_100bt": _fineweb_edu.cd("sample/100BT"),
    "fineweb_edu_sample_350bt": _fineweb_edu.cd("sample/350BT"),
    "slimpajama": _download(
        "raw/SlimPajama-627B", "cerebras/SlimPajama-627B", "2d0accd", "raw/SlimPajama-627B-262830"
    ).cd("2d0accd/huggingface.co/datasets/cerebras/SlimPajama-627B/resolve/2d0accd"),
    "slimpajama_6b": _download("raw/SlimPajama-6B", "DKYoon/SlimPajama-6B", "b5f90f4", "raw/SlimPajama-6B-be35b7").cd(
        "data"
    ),
    "dolma3_mix_150b_1025": _download(
        "raw/dolma3_mix-150B-1025",
        "allenai/dolma3_mix-150B-1025",
        "15d04ee",
        "raw/dolma3_mix-150B-1025-15d04ee",
        append_sha_to_path=True,
    ).cd("15d04ee"),
    "dclm_baseline_wrong": _download(
        "raw/dclm-baseline-1.0", "mlfoundations/dclm-baseline-1.0", "a3b142c", "raw/dclm_WRONG_20250211/"
    ),
    "dclm_baseline": _download("raw/dclm-baseline-1.0", "mlfoundations/dclm-baseline-1.0", "a3b142c", "raw/dclm").cd(
        "a3b142c"
    ),
    "the_stack_dedup": _download(
        "raw/the-stack-dedup", "bigcode/the-stack-dedup", "17cad72", "raw/the-stack-dedup-4ba450"
    ).cd("17cad72"),
    "proofpile_2": _download("raw/proof-pile-2", "EleutherAI/proof-pile-2", "901a927", "raw/proof-pile-2-f1b1d8").cd(
        "901a927/huggingface.co/datasets/EleutherAI/proof-pile-2/resolve/901a927"
    ),
    "the_pile_openwebtext2": _download(
        "raw/the_pile_openwebtext2", "vietgpt/the_pile_openwebtext2", "1de27c6", "raw/the_pile_openwebtext2"
    ).cd("1de27c6/huggingface.co/datasets/vietgpt/the_pile_openwebtext2/resolve/1de27c6"),
    # Older downloads kept <output>/<revision>: no .cd, as in Marin.
    "starcoderdata": _download("raw/starcoderdata", "bigcode/starcoderdata", "9fc30b5", "raw/starcoderdata-720c8c"),
}

tokenized: dict[str, ExecutorStep] = {
    "dclm_baseline": _tokenize_simple(
        "dclm_baseline", downloads["dclm_baseline"], llama3_tokenizer, "tokenized/dclm_baseline-0206f1/"
    ),
    "starcoderdata": _tokenize_simple(
        "starcoderdata",
        downloads["starcoderdata"],
        llama3_tokenizer,
        "tokenized/starcoderdata-12f018/",
        TextLmDatasetFormat(text_key="content"),
    ),
    "proofpile_2": _tokenize_simple(
        "proofpile_2", downloads["proofpile_2"], llama3_tokenizer, "tokenized/proofpile_2-4a35c7/"
    ),
    "slimpajama_6b": _tokenize_simple("SlimPajama-6B", downloads["slimpajama_6b"], llama3_tokenizer),
    "fineweb_edu": _tokenize_simple("fineweb-edu", downloads["fineweb_edu"], llama3_tokenizer),
    "dolma3_mix_150b_1025": _tokenize_simple(
        "dolma3_mix-150B-1025",
        downloads["dolma3_mix_150b_1025"],
        llama3_tokenizer,
        "tokenized/dolma3_mix-150B-1025-15d04ee/",
    ),
}
