"""Marin's ``marin.processing.tokenize.tokenize``: tokenize configs and the tokenize step function
(the data-mixture builders are in ``data_configs``, as in Marin).

Everything resolves offline. A dataset is a local path (folder or file of jsonl / jsonl.gz records), a
step output, or a Hugging Face dataset id that is already in the local Hugging Face cache
(``HF_HUB_OFFLINE=1``); a tokenizer is a local directory or a tokenizer name in that cache. What is
missing is named in the error together with how to make it available. Levanter dataset formats
(``TextLmDatasetFormat``, ``ChatLmDatasetFormat`` ...) are passed to Levanter's cache builder as is.

Levanter is imported only inside functions (it takes seconds), so defining an experiment stays fast.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from marin_assets.core.documents import as_path_list, list_document_files
from marin_assets.execution.step import unwrap_versioned_value
from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path

logger = logging.getLogger(__name__)

OFFLINE_HINT = (
    "nothing is downloaded at run time (HF_HUB_OFFLINE=1): on a machine with network run "
    "`huggingface-cli download {kind}{name}` and copy the Hugging Face cache ($HF_HOME, default "
    "~/.cache/huggingface) here, or pass a local path instead"
)


@dataclass(frozen=True)
class HfDatasetSpec:
    """A Hugging Face dataset id with an optional subset (config) name."""

    id: str
    name: str | None = None


@dataclass(frozen=True)
class TokenizeConfig:
    """Config of :func:`tokenize` (Marin's field names).

    Attributes:
        train_paths: documents for the ``train`` split: paths (folders or jsonl files) / step outputs.
        validation_paths: documents for the ``validation`` split.
        cache_path: the cache root; splits go to ``<cache_path>/<split>``.
        tokenizer: a local tokenizer directory or a tokenizer name in the local HF cache.
        format: a Levanter dataset format (None: ``TextLmDatasetFormat()``).
        sample_count: tokenize only the first ``sample_count`` records of each split (None: all).
        hf_dataset: a Hugging Face dataset (from the local cache) instead of paths.
        timeout_s: fail instead of hanging when a build takes longer than this.
    """

    train_paths: Sequence[Any]
    validation_paths: Sequence[Any]
    cache_path: Any
    tokenizer: Any
    format: Any = None
    sample_count: Any = None
    hf_dataset: HfDatasetSpec | None = None
    timeout_s: float = 3600.0


def resolve_tokenizer(tokenizer: str) -> str:
    """A local directory ``AutoTokenizer`` can load for ``tokenizer`` (a path or a cached HF name).

    Raises FileNotFoundError naming the tokenizer and how to make it available offline.
    """
    name = unwrap_versioned_value(tokenizer)
    if os.path.isdir(name):
        return os.path.abspath(name)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(name, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError) as exc:
        hint = OFFLINE_HINT.format(kind="", name=name)
        raise FileNotFoundError(
            f"tokenizer {name!r} is neither a local directory nor in the local Hugging Face cache ({exc}); {hint}"
        ) from exc


def hf_dataset_records(spec: HfDatasetSpec, split: str = "train") -> Iterator[dict[str, Any]]:
    """Rows of a Hugging Face dataset from the local cache only; FileNotFoundError when absent.

    A hub snapshot in the cache (what ``huggingface-cli download --repo-type dataset`` writes) is
    read with ``datasets`` from its folder; otherwise a dataset ``datasets`` prepared earlier.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        source = snapshot_download(spec.id, repo_type="dataset", local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        source = spec.id  # maybe prepared by datasets itself (its own cache)
    try:
        dataset = datasets.load_dataset(source, spec.name, split=split)
    except Exception as exc:  # datasets raises several types (ConnectionError, FileNotFoundError, ValueError)
        label = spec.id + (f" (subset {spec.name})" if spec.name else "")
        hint = OFFLINE_HINT.format(kind="--repo-type dataset ", name=spec.id)
        raise FileNotFoundError(
            f"Hugging Face dataset {label}, split {split!r}, is not in the local cache: "
            f"{type(exc).__name__}: {exc}; {hint}"
        ) from exc
    yield from dataset


def _file_records(files: Sequence[str]) -> Iterator[dict[str, Any]]:
    for path in files:
        fs, p = filesystem(path)
        with fs.open(p, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw
            for number, line in enumerate(io.TextIOWrapper(stream, encoding="utf-8"), start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not a JSON record: {exc}") from exc


def _write_records(records: Iterator[dict[str, Any]], limit: int | None, dest: str) -> list[str]:
    """The first ``limit`` records (all when None) as one jsonl.gz file under ``dest``."""
    buf = io.BytesIO()
    count = 0
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        for record in records:
            if limit is not None and count >= limit:
                break
            gz.write((json.dumps(record, default=str) + "\n").encode("utf-8"))
            count += 1
    if count == 0:
        raise ValueError(f"no records to tokenize for {dest}")
    path = join_path(dest, "records-00000.jsonl.gz")
    atomic_write_bytes(path, buf.getvalue())
    return [path]


def _split_files(config: TokenizeConfig, split: str, paths: Sequence[str], sample_count: int | None) -> list[str]:
    staging = join_path(config.cache_path, f"_input/{split}")
    if config.hf_dataset is not None:
        return _write_records(hf_dataset_records(config.hf_dataset, split), sample_count, staging)
    files = list_document_files(paths)
    if not files:
        raise FileNotFoundError(f"no jsonl documents for split {split} under {list(as_path_list(paths))}")
    if sample_count is not None:
        return _write_records(_file_records(files), sample_count, staging)
    return files


def tokenize(config: TokenizeConfig) -> dict[str, Any]:
    """Build (or resume) the Levanter cache of every split that has documents; return its counts."""
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig
    from levanter.store.cache import CacheOptions

    from marin_assets.processing.tokenize.levanter_cache import cache_split_stats
    from marin_resources.ray_cluster import ensure_ray

    tokenizer = resolve_tokenizer(config.tokenizer)
    ensure_ray()  # Levanter's cache builder runs on Ray
    data_format = config.format if config.format is not None else TextLmDatasetFormat()
    sample_count = unwrap_versioned_value(config.sample_count)
    splits = {"train": list(config.train_paths), "validation": list(config.validation_paths)}
    if config.hf_dataset is not None:
        splits = {"train": [config.hf_dataset.id], "validation": []}
    start = time.monotonic()
    per_split: dict[str, Any] = {}
    for split, paths in splits.items():
        if not paths:
            continue
        files = _split_files(config, split, paths, sample_count)
        urls = {"train_urls": files} if split == "train" else {"validation_urls": files}
        data = UrlSingleDatasetLMConfig(
            tokenizer=tokenizer,
            cache_dir=config.cache_path,
            cache_options=CacheOptions(num_shard_groups=1),
            format=data_format,
            **urls,
        )
        cache = data.build_or_load_cache(split, monitors=False)
        if cache is None:
            raise RuntimeError(f"Levanter built no cache for split {split} from {len(files)} files")
        cache.await_finished(timeout=config.timeout_s)
        per_split[split] = cache_split_stats(join_path(config.cache_path, split))
    if not per_split:
        raise ValueError("tokenize step got no documents for any split")
    return {
        "tokenizer": str(unwrap_versioned_value(config.tokenizer)),
        "seconds": round(time.monotonic() - start, 2),
        "splits": per_split,
    }
