"""Marin's older module name ``marin.download.huggingface.download``: the same ``DownloadConfig``
as :mod:`.download_hf` (scripts import it from either; Marin moved it to ``download_hf``).

``default_download`` lives where Marin keeps it, ``experiments.defaults``
(:func:`marin_assets.experiments.defaults.default_download`).
"""

from marin_assets.download.huggingface.download_hf import (
    PROVENANCE,
    DownloadConfig,
    HfDatasetNotCachedError,
    download_hf,
)

__all__ = ["PROVENANCE", "DownloadConfig", "HfDatasetNotCachedError", "download_hf"]
