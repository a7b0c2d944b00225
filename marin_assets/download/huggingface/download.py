"""Marin's ``marin.download.huggingface.download``: ``DownloadConfig`` and ``default_download``, offline.

The step function is Marin's ``download_hf`` (:mod:`.download_hf`).

Like Marin's ``default_download``, the step takes a dataset id and a revision and writes the
dataset's files to its output path -- but it never touches the network: the files come from the
local HF hub cache (``$HF_HUB_CACHE`` / ``$HF_HOME/hub``, or ``cache_dir``), exactly as with
``HF_HUB_OFFLINE=1``. A dataset or revision missing from the cache fails with an error that
names what is missing, where it looked and how to make it available.

The output is a complete landing drop, so the raw stage reads it like any other
(``RawConfig(drop_path=output_path_of(download_step))``)::

    <output>/<files of the dataset revision, same relative paths>
    <output>/provenance.json   dataset id, requested revision, resolved commit, file sha256s
    <output>/manifest.json     drop manifest (path, bytes, sha256 per file), written last

Files are copied with a streaming copy to a temporary name and renamed (never a half file), and
their sha256 is computed while copying.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marin_assets.execution.step import THIS_OUTPUT_PATH, ExecutorStep, this_output_path, versioned

PROVENANCE = "provenance.json"


class HfDatasetNotCachedError(FileNotFoundError):
    """The dataset (or the revision) is not in the local Hugging Face cache."""


@dataclass(frozen=True)
class DownloadConfig:
    """Marin's config of the HF dataset step (same fields and defaults, plus ``cache_dir``).

    Attributes:
        hf_dataset_id: ``org/name`` on the Hugging Face hub.
        revision: a branch, tag or commit (the commit it resolves to is recorded).
        hf_urls_glob: keep only files matching one of these globs (e.g. ``["data/*.parquet"]``;
            empty: every file of the revision).
        gcs_output_path: where the files, ``provenance.json`` and ``manifest.json`` go (any fsspec
            path; Marin's name).
        public_gcs_path, wait_for_completion, timeout, poll_interval: Marin's Storage Transfer
            Service options (accepted; nothing is transferred over the network here).
        hf_repo_type_prefix: ``datasets`` (the cache holds dataset repos).
        cache_dir: ours -- the HF hub cache to read (None: ``huggingface_hub``'s default, which
            follows ``$HF_HUB_CACHE`` / ``$HF_HOME``).
    """

    hf_dataset_id: str
    revision: str
    hf_urls_glob: list[str] = field(default_factory=list)
    gcs_output_path: str = THIS_OUTPUT_PATH
    public_gcs_path: str = "gs://hf_dataset_transfer_bucket"
    wait_for_completion: bool = True
    timeout: int = 1800
    poll_interval: int = 10
    hf_repo_type_prefix: str = "datasets"
    cache_dir: str | None = None


def default_download(
    name: str,
    hf_dataset_id: str,
    revision: str,
    override_output_path: str | None = None,
    hf_urls_glob: list[str] | None = None,
    cache_dir: str | None = None,
) -> ExecutorStep:
    """A step that materializes ``hf_dataset_id@revision`` from the local HF cache (Marin's shape).

    The dataset id, the revision and the globs enter the version; the cache location does not.
    """
    from marin_assets.download.huggingface.download_hf import download_hf

    return ExecutorStep(
        name=name,
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=versioned(hf_dataset_id),
            revision=versioned(revision),
            gcs_output_path=this_output_path(),
            hf_urls_glob=versioned(list(hf_urls_glob or [])),
            cache_dir=cache_dir,
        ),
        description=f"Hugging Face dataset {hf_dataset_id}@{revision} from the local HF cache (offline).",
        override_output_path=override_output_path,
    )
