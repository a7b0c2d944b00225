"""Marin's ``marin.download.huggingface.download_hf``: ``DownloadConfig`` and ``download_hf``.

Like Marin's ``download_hf``, the step takes a repository id and a revision and writes the
revision's files to its output path. Where they come from:

* **The hub** (the default): ``huggingface_hub``'s client against ``$HF_ENDPOINT`` (default
  ``https://huggingface.co``) resolves the revision to its commit and file list, then the files stream
  straight into the output -- local or ``gs://`` -- ``max_streams`` at once, each through a temporary
  name, its sha256 computed on the way and checked against the hub's (:mod:`.hub`). A dropped
  connection resumes with a ``Range`` request; a new attempt of the step keeps the files an earlier
  one finished and resumes a local partial file. A progress line (files, MB, MB/s) every few seconds.
  A hub that does not accept connections fails the step within seconds, one line naming the host
  (``HubUnreachableError``) -- unless the revision is in the local Hugging Face cache, which is then
  used (a warning says so).
* **The local Hugging Face cache only** with ``HF_HUB_OFFLINE=1`` (``$HF_HUB_CACHE`` /
  ``$HF_HOME/hub``, or ``cache_dir``): nothing touches the network, and a dataset or revision
  missing from the cache fails with an error that names what is missing, where it looked and how to
  make it available.

The step that runs it is Marin's ``default_download`` (``experiments.defaults``). The output is a
complete landing drop, so the raw stage reads it like any other
(``RawConfig(drop_path=output_path_of(download_step))``)::

    <output>/<files of the revision, same relative paths>
    <output>/provenance.json   repository id, requested revision, resolved commit, source, file sha256s
    <output>/manifest.json     drop manifest (path, bytes, sha256 per file), written last

(under ``<output>/<revision>/`` with ``append_sha_to_path=True``, as in Marin).
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from marin_assets.core.io import write_json
from marin_assets.download.huggingface import hub
from marin_assets.execution.step import THIS_OUTPUT_PATH, StepPath
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.landing.zone import MANIFEST

logger = logging.getLogger(__name__)

_COPY = 4 << 20
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
        append_sha_to_path: Marin's: write under ``gcs_output_path/<revision>`` instead of
            directly into ``gcs_output_path``.
        public_gcs_path, wait_for_completion, timeout, poll_interval: Marin's Storage Transfer
            Service options (accepted; the files stream from the hub directly here).
        hf_repo_type_prefix: ``datasets`` for a dataset repository; ``""`` or ``models`` for a
            model (Marin's ``download_model_step`` passes ``""``).
        cache_dir: ours -- the HF hub cache read with ``HF_HUB_OFFLINE=1`` or when the hub is
            unreachable (None: ``huggingface_hub``'s default, ``$HF_HUB_CACHE`` / ``$HF_HOME``).
        max_streams: ours -- files transferred at once.
    """

    hf_dataset_id: str
    revision: str
    hf_urls_glob: list[str] = field(default_factory=list)
    gcs_output_path: StepPath = THIS_OUTPUT_PATH
    append_sha_to_path: bool = False
    public_gcs_path: StepPath = "gs://hf_dataset_transfer_bucket"
    wait_for_completion: bool = True
    timeout: int = 1800
    poll_interval: int = 10
    hf_repo_type_prefix: str = "datasets"
    cache_dir: StepPath | None = None
    max_streams: int = hub.DEFAULT_STREAMS


def _cache_dir(config: DownloadConfig) -> str:
    if config.cache_dir:
        return config.cache_dir
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def cached_snapshot(config: DownloadConfig) -> str:
    """The local snapshot folder of ``hf_dataset_id@revision`` (never downloads).

    Raises:
        HfDatasetNotCachedError: naming the dataset, the revision, the cache folder, and how to
            fill it.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = _cache_dir(config)
    repo_type = hub.repo_type_of(config.hf_repo_type_prefix)
    try:
        return snapshot_download(
            config.hf_dataset_id,
            repo_type=repo_type,
            revision=config.revision,
            cache_dir=cache,
            local_files_only=True,
        )
    except (LocalEntryNotFoundError, FileNotFoundError) as exc:
        repo_folder = os.path.join(cache, f"{repo_type}s--" + config.hf_dataset_id.replace("/", "--"))
        what = (
            f"revision {config.revision!r} of it"
            if os.path.isdir(repo_folder)
            else f"its folder {os.path.basename(repo_folder)!r}"
        )
        raise HfDatasetNotCachedError(
            f"HF dataset {config.hf_dataset_id!r} at revision {config.revision!r} is not in the local "
            f"Hugging Face cache {cache!r} ({what} is missing). Nothing is downloaded with HF_HUB_OFFLINE=1: "
            "unset it to download from the hub ($HF_ENDPOINT), or on a machine with network run "
            f"`huggingface-cli download --repo-type {repo_type} {config.hf_dataset_id} --revision {config.revision}` "
            "and copy its HF cache here (set HF_HOME or HF_HUB_CACHE to it), or give the step cache_dir="
        ) from exc


def _files(snapshot: str, globs: list[str]) -> list[str]:
    """Relative paths of the snapshot's files (the cache links them to blobs; those are followed)."""
    out = []
    for directory, dirs, names in os.walk(snapshot):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(directory, name), snapshot).replace(os.sep, "/")
            if name.startswith(".") or rel in (MANIFEST, PROVENANCE):
                continue
            if not globs or any(fnmatch.fnmatch(rel, g) for g in globs):
                out.append(rel)
    return out


def _copy(source: str, target: str) -> tuple[int, str]:
    """Stream ``source`` (local) to ``target`` via a temporary name; return (bytes, sha256)."""
    fs, t = filesystem(target)
    tmp = f"{t.rsplit('/', 1)[0]}/.tmp-{os.getpid()}-{t.rsplit('/', 1)[-1]}"
    fs.makedirs(t.rsplit("/", 1)[0], exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    with open(source, "rb") as src, fs.open(tmp, "wb") as dst:
        for chunk in iter(lambda: src.read(_COPY), b""):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
    fs.mv(tmp, t)
    return size, digest.hexdigest()


def _output_of(config: DownloadConfig) -> str:
    if config.append_sha_to_path:
        return join_path(config.gcs_output_path, str(config.revision))
    return config.gcs_output_path


def _from_cache(config: DownloadConfig, output: str, snapshot: str | None = None) -> tuple[str, str, list[dict]]:
    """Copy the revision from the local HF cache; ``(commit, source, files)``."""
    snapshot = snapshot or cached_snapshot(config)
    commit = os.path.basename(os.path.normpath(snapshot))
    names = _files(snapshot, list(config.hf_urls_glob))
    if not names:
        raise HfDatasetNotCachedError(
            f"HF dataset {config.hf_dataset_id!r}@{config.revision!r} (commit {commit}) in {snapshot!r} has no "
            f"files matching {list(config.hf_urls_glob) or '*'}"
        )
    files = []
    for rel in names:
        size, sha = _copy(os.path.join(snapshot, rel), join_path(output, rel))
        files.append({"path": rel, "bytes": size, "sha256": sha})
    return commit, snapshot, files


def _from_hub(config: DownloadConfig, output: str) -> tuple[str, str, list[dict]]:
    """Stream the revision from the hub into ``output``; ``(commit, source, files)``."""
    repo_type = hub.repo_type_of(config.hf_repo_type_prefix)
    commit, remote = hub.revision_files(config.hf_dataset_id, repo_type, str(config.revision))
    globs = list(config.hf_urls_glob)
    wanted = [
        f
        for f in remote
        if f.path not in (MANIFEST, PROVENANCE)
        and not f.path.rsplit("/", 1)[-1].startswith(".")
        and (not globs or any(fnmatch.fnmatch(f.path, g) for g in globs))
    ]
    if not wanted:
        raise hub.HubNotFoundError(
            f"HF {repo_type} {config.hf_dataset_id!r}@{config.revision!r} (commit {commit}) on {hub.hub_endpoint()} "
            f"has no files matching {globs or '*'}"
        )
    files = hub.fetch_files(
        config.hf_dataset_id,
        repo_type,
        commit,
        wanted,
        output,
        streams=config.max_streams,
        label=f"{config.hf_dataset_id}@{config.revision}",
    )
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return commit, f"{hub.hub_endpoint()}/{prefix}{config.hf_dataset_id}/tree/{commit}", files


def download_hf(config: DownloadConfig) -> dict[str, Any]:
    """Step function: fetch ``hf_dataset_id@revision`` into the output (see the module docstring);
    returns metadata (commit, files, bytes, seconds)."""
    start = time.monotonic()
    output = _output_of(config)
    fs, _ = filesystem(output)
    if fs.exists(join_path(output, MANIFEST)):
        fs.rm(join_path(output, MANIFEST))  # an old attempt's drop is not complete any more
    if hub.hub_offline():
        commit, source, files = _from_cache(config, output)
    else:
        try:
            hub.check_reachable(f"HF dataset {config.hf_dataset_id!r}@{config.revision!r}")
        except hub.HubUnreachableError as unreachable:
            try:
                snapshot = cached_snapshot(config)
            except HfDatasetNotCachedError:
                raise unreachable from None
            logger.warning("%s; using the copy in the local Hugging Face cache (%s)", unreachable, snapshot)
            commit, source, files = _from_cache(config, output, snapshot)
        else:
            commit, source, files = _from_hub(config, output)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    provenance = {
        "hf_dataset_id": config.hf_dataset_id,
        "revision": config.revision,
        "commit": commit,
        "snapshot": source,
        "files": files,
        "created_at": created,
    }
    write_json(join_path(output, PROVENANCE), provenance)
    # The manifest last: the output becomes a complete drop in one step.
    write_json(
        join_path(output, MANIFEST),
        {"source": config.hf_dataset_id, "revision": commit, "created_at": created, "files": files},
    )
    return {
        "hf_dataset_id": config.hf_dataset_id,
        "revision": config.revision,
        "commit": commit,
        "files": len(files),
        "bytes": sum(f["bytes"] for f in files),
        "seconds": round(time.monotonic() - start, 3),
    }
