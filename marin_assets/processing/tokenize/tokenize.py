"""Marin's ``marin.processing.tokenize.tokenize``: ``TokenizeConfig`` and the ``tokenize`` step function.

``tokenize`` turns documents (jsonl / jsonl.gz / jsonl.zst records with a text field) into a
Levanter ``TreeCache`` with ``train/`` and ``validation/`` splits, the layout Levanter's
``LMMixtureDatasetConfig`` reads (``<cache_path>/<split>``). Two writers, chosen by
``TokenizeConfig.writer`` (not versioned: both write the same tokens):

* ``"marin"`` (default): :mod:`marin_assets.processing.tokenize.cache_writer` -- parallel
  ``encode_batch`` in a local process pool (Ray actors when the step itself runs on Ray), appended
  in order straight into the final arrays. A split is finished when its ``shard_ledger.json`` says
  ``is_finished``; a killed build resumes after the last finished input file.
* ``"levanter"``: Levanter's own builder on Ray, kept for comparison. If resuming fails (e.g. the
  options changed) the split is deleted and rebuilt. The only writer for non-text formats.

A dataset is a path (folder or file of records, local or ``gs://``), a step output, or a Hugging Face
dataset id (``HfDatasetSpec``); a tokenizer is a tokenizer directory (local or ``gs://``) or a hub name.
Hub names come from the prefix's hub mirror or the hub (``$HF_ENDPOINT``), or with ``HF_HUB_OFFLINE=1``
from the local Hugging Face cache only (:mod:`marin_assets.download.huggingface.hub_names`). What is
missing is named in the error together with how to make it available. Levanter is imported only
inside functions (it takes seconds), so defining an experiment stays fast.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from marin_assets.core.documents import as_path_list, iter_texts, list_document_files
from marin_assets.core.io import write_jsonl_gz
from marin_assets.execution.step import StepPath, unwrap_versioned_value
from marin_assets.execution.storage import atomic_write_bytes, filesystem, is_local, join_path
from marin_assets.processing.tokenize.cache_writer import build_cache, read_cache_ledger
from marin_resources.ray_connect import in_ray_worker

if TYPE_CHECKING:  # Levanter is imported only inside functions (it takes seconds)
    from levanter.data.text import LmDatasetFormatBase

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")

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


class TokenizeConfigBase:
    """Marin's common base of the tokenize configs (:class:`TokenizeConfig`, :class:`HfTokenizeConfig`)."""


@dataclass(frozen=True)
class TokenizeConfig(TokenizeConfigBase):
    """Config of :func:`tokenize` (Marin's field names first, then this project's writer options).

    Attributes:
        train_paths: documents for the ``train`` split: folders / files / step outputs (may be empty).
        validation_paths: documents for the ``validation`` split (may be empty).
        cache_path: the cache root; splits go to ``<cache_path>/<split>``.
        tokenizer: a tokenizer directory (local or ``gs://``) or a tokenizer name in the local HF cache.
        tags: Marin's dataset tags (recorded in the stats).
        sample_count: tokenize only the first ``sample_count`` records of each split (None: all).
        format: a Levanter dataset format (None: ``TextLmDatasetFormat()``, the ``text`` field). The
            marin writer reads text formats; other formats need ``writer="levanter"``.
        hf_dataset: a Hugging Face dataset (from the local cache) instead of paths.
        writer: ``"marin"`` (our cache writer) or ``"levanter"`` (Levanter's Ray builder).
        workers: marin writer: encoding processes (None: the CPUs this process may use); on Ray,
            actors of one CPU each (None: the cluster's free CPUs).
        num_shard_groups: levanter writer: shard groups; None picks ``min(files, max(1, cpus // 4))``
            (few groups on small clusters avoid the builder's deadlock on 2 cores).
        batch_size: levanter writer: documents per tokenizer call.
        timeout_s: levanter writer: fail instead of hanging when a build takes longer than this.
        cache_options: Marin's Levanter ``CacheOptions`` (accepted so Marin's registries construct;
            the writers here choose their own batching).
    """

    train_paths: Sequence[StepPath]
    validation_paths: Sequence[StepPath]
    cache_path: StepPath
    tokenizer: StepPath
    tags: Sequence[str] = field(default_factory=list)
    sample_count: int | None = None
    format: LmDatasetFormatBase | None = None
    hf_dataset: HfDatasetSpec | None = None
    writer: Literal["marin", "levanter"] = "marin"
    workers: int | None = None
    num_shard_groups: int | None = None
    batch_size: int = 128
    timeout_s: float = 3600.0
    cache_options: Any = None


@dataclass(frozen=True)
class HfTokenizeConfig(TokenizeConfigBase):
    """Marin's config for tokenizing a Hugging Face dataset by id (read from the local HF cache).

    Same fields as Marin's (``id``, ``name`` -- the subset --, ``cache_path``, ``tokenizer``,
    ``format``, ``sample_count``, ``tags``), so a script's versioned values enter the version under
    Marin's keys; :func:`tokenize` runs it as ``TokenizeConfig(hf_dataset=HfDatasetSpec(id, name))``.
    """

    id: str
    cache_path: StepPath
    tokenizer: StepPath
    name: str | None = None
    tags: Sequence[str] = field(default_factory=list)
    sample_count: int | None = None
    format: LmDatasetFormatBase | None = None

    def as_tokenize_config(self) -> TokenizeConfig:
        """The equivalent :class:`TokenizeConfig`."""
        return TokenizeConfig(
            train_paths=[],
            validation_paths=[],
            cache_path=self.cache_path,
            tokenizer=self.tokenizer,
            tags=list(self.tags),
            sample_count=self.sample_count,
            format=self.format,
            hf_dataset=HfDatasetSpec(self.id, self.name),
        )


# ------------------------------------------------------------------------------------------
# Offline resolution of tokenizers and Hugging Face datasets


def resolve_tokenizer(tokenizer: str) -> str:
    """A directory ``AutoTokenizer`` can load for ``tokenizer``: a local or remote (``gs://``)
    directory as is; a hub name (``gpt2``, ``meta-llama/...``) from the hub mirror of the prefix,
    fetched from the hub (``$HF_ENDPOINT``) when it is not there yet -- or, with ``HF_HUB_OFFLINE=1``
    or an unreachable hub, from the local Hugging Face cache
    (:func:`marin_assets.download.huggingface.hub_names.resolve_hub_tokenizer`).

    Raises FileNotFoundError naming the tokenizer and how to make it available.
    """
    name = str(unwrap_versioned_value(tokenizer))
    if not is_local(name):
        return name
    if os.path.isdir(name):
        return os.path.abspath(name)
    from marin_assets.download.huggingface.hub_names import resolve_hub_tokenizer

    return resolve_hub_tokenizer(name, OFFLINE_HINT.format(kind="", name=name))


def hf_dataset_records(spec: HfDatasetSpec, split: str = "train") -> Iterator[dict[str, Any]]:
    """Rows of a Hugging Face dataset by id; FileNotFoundError when it cannot be had.

    The repository comes from the hub mirror of the prefix, the hub (``$HF_ENDPOINT``, into the
    mirror) or, with ``HF_HUB_OFFLINE=1``, the local cache
    (:func:`marin_assets.download.huggingface.hub_names.resolve_hub_repo`), and is read with
    ``datasets`` from that folder; failing that, a dataset ``datasets`` prepared earlier in its own
    cache. ``datasets`` itself never downloads (``HF_DATASETS_OFFLINE``).
    """
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    from marin_assets.download.huggingface.hub import HubNotFoundError
    from marin_assets.download.huggingface.hub_names import local_folder, resolve_hub_repo

    hint = OFFLINE_HINT.format(kind="--repo-type dataset ", name=spec.id)
    try:
        source = local_folder(resolve_hub_repo(spec.id, "dataset", None, f"Hugging Face dataset {spec.id!r}", hint))
    except HubNotFoundError:
        raise
    except FileNotFoundError:
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


# ------------------------------------------------------------------------------------------
# Cache ledgers


def read_ledger(split_path: str) -> dict | None:
    """The parsed ``shard_ledger.json`` of a cache split (local or remote), or None."""
    return read_cache_ledger(split_path)


def cache_split_stats(split_path: str) -> dict | None:
    """``{"documents", "tokens", "finished"}`` of a cache split from its ledger and store, or None."""
    ledger = read_ledger(split_path)
    if ledger is None:
        return None
    tokens = (ledger.get("field_counts") or {}).get("input_ids")
    if tokens is None and ledger.get("is_finished"):
        from levanter.data.text import cached_token_count

        tokens = int(cached_token_count(split_path))
    return {"documents": int(ledger["total_num_rows"]), "tokens": tokens, "finished": bool(ledger.get("is_finished"))}


# ------------------------------------------------------------------------------------------
# Inputs


def _text_key(config: TokenizeConfig) -> str:
    """The record field the marin writer reads; raises for formats only Levanter's builder reads."""
    fmt = unwrap_versioned_value(config.format)
    if fmt is None or fmt == "text":
        return "text"
    if type(fmt).__name__ == "TextLmDatasetFormat":
        return fmt.text_key
    if config.writer != "levanter":
        raise ValueError(
            f"TokenizeConfig.format {type(fmt).__name__} is not a text format: the marin writer reads "
            "text records only; pass writer='levanter' to build it with Levanter's builder"
        )
    return "text"


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


def _split_files(config: TokenizeConfig, split: str, paths: Sequence[Any], text_key: str) -> list[str]:
    """The input files of ``split``: the documents themselves, or a staged sample / HF dataset."""
    sample_count = unwrap_versioned_value(config.sample_count)
    staging = join_path(config.cache_path, f"_input/{split}")
    if config.hf_dataset is not None:
        return _write_records(hf_dataset_records(config.hf_dataset, split), sample_count, staging)
    files = list_document_files(paths)
    if not files:
        raise FileNotFoundError(f"no jsonl documents for split {split} under {list(as_path_list(paths))}")
    if sample_count is None:
        return files
    if text_key == "text" and unwrap_versioned_value(config.format) in (None, "text"):
        path = join_path(staging, "sample-00000.jsonl.gz")
        write_jsonl_gz(path, ({text_key: t} for t in itertools.islice(iter_texts(files, text_key), sample_count)))
        return [path]
    return _write_records(_file_records(files), sample_count, staging)


# ------------------------------------------------------------------------------------------
# Writers


def _ray_cpus() -> int:
    from marin_resources.ray_connect import ensure_ray

    return int(ensure_ray().get("CPU", 1))


def _build_split_levanter(config: TokenizeConfig, split: str, files: list[str], tokenizer: str) -> None:
    """Levanter's builder on Ray; a split that fails to resume is deleted and built once more."""
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig
    from levanter.store.cache import CacheOptions

    fmt = unwrap_versioned_value(config.format)
    num_groups = config.num_shard_groups or min(len(files), max(1, _ray_cpus() // 4))
    urls = {"train_urls": files} if split == "train" else {"validation_urls": files}
    data = UrlSingleDatasetLMConfig(
        tokenizer=tokenizer,
        cache_dir=config.cache_path,
        cache_options=CacheOptions(num_shard_groups=num_groups, batch_size=config.batch_size),
        format=TextLmDatasetFormat() if fmt in (None, "text") else fmt,
        **urls,
    )

    def build() -> None:
        cache = data.build_or_load_cache(split, monitors=False)
        if cache is None:
            raise RuntimeError(f"Levanter built no cache for split {split} from {len(files)} files")
        cache.await_finished(timeout=config.timeout_s)

    try:
        build()
    except Exception as exc:  # noqa: BLE001 -- any failure to resume means: rebuild from scratch once
        split_path = join_path(config.cache_path, split)
        logger.warning("resuming cache %s failed (%s); rebuilding it", split_path, exc)
        fs, p = filesystem(split_path)
        if fs.exists(p):
            fs.rm(p, recursive=True)
        build()


def marin_writer_placement(workers: int | None) -> tuple[str, int]:
    """``(backend, workers)`` of the marin writer: Ray actors when the step runs on Ray, else processes.

    The engine launches a step that declares ``resources`` as a Ray task; its blocks then go to
    ``workers`` Ray actors of one CPU each (default: the CPUs the cluster has free, so that every
    actor can start). A step run in process uses a local pool of ``workers`` processes (default:
    the CPUs this process may use).
    """
    if in_ray_worker():
        import ray

        return "ray", workers or max(1, int(ray.available_resources().get("CPU", 1)))
    return "local", workers or len(os.sched_getaffinity(0))


def tokenize(config: TokenizeConfig | HfTokenizeConfig) -> dict[str, Any]:
    """Build (or resume, or load) the Levanter cache of every split that has documents.

    Returns step metadata: documents, tokens, tokens/s and the cache path (per split and total);
    also written to ``<cache_path>/tokenize_stats.json``.
    """
    if isinstance(config, HfTokenizeConfig):
        config = config.as_tokenize_config()
    if config.writer not in ("marin", "levanter"):
        raise ValueError(f"TokenizeConfig.writer must be 'marin' or 'levanter', got {config.writer!r}")
    text_key = _text_key(config)
    tokenizer = resolve_tokenizer(config.tokenizer)
    splits = {"train": list(config.train_paths), "validation": list(config.validation_paths)}
    if config.hf_dataset is not None:
        splits = {"train": [config.hf_dataset.id], "validation": []}
    start = time.monotonic()
    per_split: dict[str, dict] = {}
    for split, paths in splits.items():
        if not as_path_list(paths) and config.hf_dataset is None:
            continue
        files = _split_files(config, split, paths, text_key)
        split_path = join_path(config.cache_path, split)
        t0 = time.monotonic()
        if config.writer == "marin":
            backend, workers = marin_writer_placement(config.workers)
            build_cache(files, split_path, tokenizer, text_key=text_key, workers=workers, backend=backend)
        else:
            _build_split_levanter(config, split, files, tokenizer)
        stats = cache_split_stats(split_path)
        if not stats or not stats["finished"]:
            raise RuntimeError(f"cache {split_path} is not finished after building")
        seconds = time.monotonic() - t0
        stats.update(
            files=len(files), seconds=round(seconds, 2), tokens_per_s=round(stats["tokens"] / max(seconds, 1e-9), 1)
        )
        per_split[split] = stats
    if not per_split:
        raise ValueError("tokenize step got no documents for any split")
    total_tokens = sum(s["tokens"] for s in per_split.values())
    seconds = time.monotonic() - start
    summary = {
        "documents": sum(s["documents"] for s in per_split.values()),
        "tokens": total_tokens,
        "tokens_per_s": round(total_tokens / max(seconds, 1e-9), 1),
        "seconds": round(seconds, 2),
        "cache_path": config.cache_path,
        "tokenizer": str(unwrap_versioned_value(config.tokenizer)),
        "writer": config.writer,
        "splits": per_split,
    }
    if config.tags:
        summary["tags"] = list(config.tags)
    atomic_write_bytes(join_path(config.cache_path, "tokenize_stats.json"), json.dumps(summary, indent=2).encode())
    return summary
