"""Simple single-corpus dataset definitions and tokenization."""

import os.path

from levanter.data.text import TextLmDatasetFormat
from levanter.store.cache import CacheOptions
from marin.download.huggingface.download_hf import DownloadConfig, download_hf
from marin.execution.executor import ExecutorStep, this_output_path, versioned
from marin.processing.tokenize import TokenizeConfig, tokenize

from experiments.llama import llama3_tokenizer


def _tokenize_simple(
    name: str,
    raw_dataset: ExecutorStep,
    tokenizer: str = llama3_tokenizer,
    override_path: str | None = None,
    text_format: TextLmDatasetFormat = TextLmDatasetFormat(),  # noqa: B008 - as in Marin
    cache_options: CacheOptions | None = None,
) -> ExecutorStep[TokenizeConfig]:
    config = TokenizeConfig(
        train_paths=[raw_dataset],
        validation_paths=versioned([]),
        cache_path=this_output_path(),
        tokenizer=versioned(tokenizer),
        format=text_format,
    )
    if cache_options is not None:
        config = TokenizeConfig(
            train_paths=config.train_paths,
            validation_paths=config.validation_paths,
            cache_path=config.cache_path,
            tokenizer=config.tokenizer,
            format=config.format,
            cache_options=cache_options,
        )
    step = ExecutorStep(
        name=os.path.join("tokenized", name),
        fn=tokenize,
        config=config,
        pip_dependency_groups=["sentencepiece"],
    )
    if override_path is not None:
        step = step.with_output_path(override_path)
    return step


def _download(name: str, dataset_id: str, revision: str, override: str, **kwargs) -> ExecutorStep:
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


downloads = {
    "fineweb": _download("raw/fineweb", "HuggingFaceFW/fineweb", "cd85054", "raw/fineweb"),
    "fineweb_edu": _download("raw/fineweb-edu", "HuggingFaceFW/fineweb-edu", "3c452cb", "raw/fineweb-edu-c2beb4").cd(
        "3c452cb/huggingface.co/datasets/HuggingFaceFW/fineweb-edu/resolve/3c452cb"
    ),
    "slimpajama_6b": _download("raw/SlimPajama-6B", "DKYoon/SlimPajama-6B", "b5f90f4", "raw/SlimPajama-6B-be35b7").cd(
        "b5f90f4/huggingface.co/datasets/DKYoon/SlimPajama-6B/resolve/b5f90f4"
    ),
    "dclm_baseline": _download(
        "raw/dclm-baseline-1.0", "mlfoundations/dclm-baseline-1.0", "a3b142c", "raw/dclm", timeout=24 * 60 * 60
    ).cd("a3b142c"),
    "starcoderdata": _download("raw/starcoderdata", "bigcode/starcoderdata", "9fc30b5", "raw/starcoderdata-720c8c"),
}

tokenized = {
    "dclm_baseline": _tokenize_simple(
        "dclm_baseline", downloads["dclm_baseline"], override_path="tokenized/dclm_baseline-0206f1/"
    ),
    "starcoderdata": _tokenize_simple(
        "starcoderdata",
        downloads["starcoderdata"],
        text_format=TextLmDatasetFormat(text_key="content"),
        override_path="tokenized/starcoderdata-12f018/",
    ),
    "slimpajama_6b": _tokenize_simple("SlimPajama-6B", downloads["slimpajama_6b"]),
    "fineweb_edu": _tokenize_simple("fineweb-edu", downloads["fineweb_edu"]),
}
