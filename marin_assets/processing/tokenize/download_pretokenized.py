"""Marin's ``marin.processing.tokenize.download_pretokenized``: a step that downloads a Levanter cache
someone tokenized already (a Hugging Face dataset repository holding ``train/``, ``validation/`` ...)
and stands for a tokenize step in a data mixture.

``download_pretokenized_cache(name, hf_repo_id, tokenizer, hf_revision=None, hf_token=None, tags=None,
format=None)`` is Marin's: a step ``tokenized/subcache/<name>`` whose config
(:class:`PretokenizedCacheDownloadConfig`) versions the tokenizer, the repository and the revision
(``ensure_versioned``), and whose function fetches the repository into the step output with
``download_hf`` (:mod:`marin_assets.download.huggingface.download_hf`: the hub through
``$HF_ENDPOINT``, or the local Hugging Face cache with ``HF_HUB_OFFLINE=1``). ``default_train`` and
``lm_data_config`` read the step's output as the cache and ``tokenizer`` as its tokenizer. ``format``
None is Levanter's ``TextLmDatasetFormat()`` (Marin's default), left unbuilt so that defining the step
imports no Levanter; ``hf_token``, when given, is the token of this download (it is not versioned).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.step import THIS_OUTPUT_PATH, ExecutorStep, InputName, StepPath, ensure_versioned
from marin_assets.processing.tokenize.tokenize import TokenizeConfigBase

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class PretokenizedCacheDownloadConfig(TokenizeConfigBase):
    """Marin's config of a pretokenized cache download (same fields)."""

    cache_path: StepPath
    tokenizer: StepPath
    hf_repo_id: str
    hf_revision: str | None = None
    hf_repo_type_prefix: str = "datasets"
    hf_token: str | None = None
    format: Any = None
    cache_options: Any = None
    tags: list[str] = dataclasses.field(default_factory=list)

    def as_lm_dataset_source_config(self, actual_output_path: str | InputName | None, *, include_raw_paths=True) -> Any:
        """Levanter's source config of the downloaded cache (Marin's method; imports Levanter)."""
        from levanter.data.text import TextLmDatasetFormat, UrlDatasetSourceConfig

        if actual_output_path is None:
            raise ValueError("actual_output_path must be provided for a downloaded cache.")
        return UrlDatasetSourceConfig(
            tags=self.tags,
            train_urls=["dummy.jsonl"],  # Levanter wants a url; the cache is already built
            validation_urls=[],
            cache_dir=actual_output_path,
            format=self.format if self.format is not None else TextLmDatasetFormat(),
        )


def download_pretokenized_cache(
    output_cache_path_name: str,
    hf_repo_id: str,
    tokenizer: str,
    hf_revision: str | None = None,
    hf_token: str | None = None,
    tags: list[str] | None = None,
    format: Any = None,  # noqa: A002 - Marin's argument name
) -> ExecutorStep:
    """Marin's: the step ``tokenized/subcache/<output_cache_path_name>`` downloading ``hf_repo_id``."""
    config = PretokenizedCacheDownloadConfig(
        cache_path=THIS_OUTPUT_PATH,
        tokenizer=ensure_versioned(tokenizer),  # type: ignore[arg-type]
        hf_repo_id=ensure_versioned(hf_repo_id),  # type: ignore[arg-type]
        hf_revision=ensure_versioned(hf_revision),  # type: ignore[arg-type]
        hf_repo_type_prefix="datasets",
        hf_token=hf_token,
        tags=tags or [],
        format=format,
    )
    return ExecutorStep(
        name=os.path.join("tokenized", "subcache", output_cache_path_name),
        fn=_actually_download_pretokenized_cache,
        config=config,
    )


def _actually_download_pretokenized_cache(cfg: PretokenizedCacheDownloadConfig) -> PretokenizedCacheDownloadConfig:
    """Step function (Marin's name): fetch the cache repository into ``cfg.cache_path``."""
    logger.info(
        "downloading pretokenized cache %s (revision %s) to %s", cfg.hf_repo_id, cfg.hf_revision, cfg.cache_path
    )
    previous = os.environ.get("HF_TOKEN")
    if cfg.hf_token:
        os.environ["HF_TOKEN"] = cfg.hf_token
    try:
        download_hf(
            DownloadConfig(
                hf_dataset_id=cfg.hf_repo_id,
                revision=cfg.hf_revision or "main",
                hf_repo_type_prefix=cfg.hf_repo_type_prefix,
                gcs_output_path=cfg.cache_path,
            )
        )
    finally:
        if cfg.hf_token:
            if previous is None:
                os.environ.pop("HF_TOKEN", None)
            else:
                os.environ["HF_TOKEN"] = previous
    return cfg
