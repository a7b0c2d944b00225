"""Tokenized caches as steps: Levanter's own cache builder on Ray.

``default_tokenize`` turns a documents directory (jsonl/jsonl.gz with a ``text`` field) into a
Levanter ``TreeCache`` with ``train/`` and ``validation/`` splits, exactly the layout Levanter's
``LMMixtureDatasetConfig`` reads (``<cache_dir>/<split>``). When the documents step is partitioned
by data drop, the tokenize step is partitioned the same way: one cache per drop, so a new drop only
tokenizes that drop.

Crash safety comes from Levanter: a split is finished only when its ``shard_ledger.json`` says
``is_finished``; an unfinished cache is resumed shard by shard on the next run, and if resuming
fails (e.g. the options changed) the split is deleted and rebuilt.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from marin_assets.execution.step import ExecutorStep, InputName, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path
from marin_assets.models._io import as_path_list, iter_texts, list_document_files

logger = logging.getLogger(__name__)

LEDGER_FILE = "shard_ledger.json"
SPLITS = ("train", "validation")


@dataclass(frozen=True)
class TokenizeConfig:
    """Config of :func:`tokenize`.

    Attributes:
        train_paths: document directories/files for the ``train`` split (may be empty).
        validation_paths: document directories/files for the ``validation`` split (may be empty).
        cache_path: the cache root; splits go to ``<cache_path>/<split>``.
        tokenizer: a tokenizer directory (``AutoTokenizer``-loadable).
        format: Levanter dataset format: ``"text"`` (the ``text_key`` field of each record).
        text_key: the field holding the text.
        sample_count: tokenize only the first ``sample_count`` documents of each split (None: all).
        num_shard_groups: Levanter's shard groups (parallel tokenizer tasks); None picks
            ``min(files, max(1, ray_cpus // 4))`` -- few groups on small clusters avoids the
            builder deadlock where a copy task waits for CPUs held by tokenizer tasks.
        timeout_s: fail instead of hanging when a build takes longer than this.
    """

    train_paths: Sequence[str] | str
    validation_paths: Sequence[str] | str
    cache_path: str
    tokenizer: str
    format: str = "text"
    text_key: str = "text"
    sample_count: int | None = None
    num_shard_groups: int | None = None
    batch_size: int = 128
    timeout_s: float = 3600.0


def _sampled_files(files: list[str], sample_count: int, dest: str, text_key: str) -> list[str]:
    """Write the first ``sample_count`` documents of ``files`` to one file under ``dest``."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        for i, text in enumerate(iter_texts(files, text_key)):
            if i >= sample_count:
                break
            gz.write((json.dumps({text_key: text}) + "\n").encode("utf-8"))
    path = join_path(dest, "sample-00000.jsonl.gz")
    atomic_write_bytes(path, buf.getvalue())
    return [path]


def read_ledger(split_path: str) -> dict | None:
    """The parsed ``shard_ledger.json`` of a cache split, or None."""
    fs, p = filesystem(join_path(split_path, LEDGER_FILE))
    try:
        with fs.open(p, "r") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


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


def _ray_cpus() -> int:
    from marin_resources.ray_cluster import ensure_ray

    return int(ensure_ray().get("CPU", 1))


def _build_split(config: TokenizeConfig, split: str, files: list[str], num_groups: int) -> None:
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig
    from levanter.store.cache import CacheOptions

    urls = {"train_urls": files} if split == "train" else {"validation_urls": files}
    data = UrlSingleDatasetLMConfig(
        tokenizer=config.tokenizer,
        cache_dir=config.cache_path,
        cache_options=CacheOptions(num_shard_groups=num_groups, batch_size=config.batch_size),
        format=TextLmDatasetFormat(text_key=config.text_key),
        **urls,
    )
    cache = data.build_or_load_cache(split, monitors=False)
    if cache is None:
        raise RuntimeError(f"Levanter built no cache for split {split} from {len(files)} files")
    cache.await_finished(timeout=config.timeout_s)


def tokenize(config: TokenizeConfig) -> dict:
    """Build (or resume, or load) the Levanter cache of every split that has documents.

    Returns step metadata: documents, tokens, tokens/s and the cache path (per split and total).
    """
    if config.format != "text":
        raise ValueError(f"only the 'text' format is supported here, got {config.format!r}")
    start = time.monotonic()
    ray_cpus = _ray_cpus()
    per_split: dict[str, dict] = {}
    for split, paths in (("train", config.train_paths), ("validation", config.validation_paths)):
        if not as_path_list(paths):
            continue
        files = list_document_files(paths)
        if not files:
            raise FileNotFoundError(f"no jsonl documents for split {split} under {paths}")
        if config.sample_count is not None:
            files = _sampled_files(
                files, config.sample_count, join_path(config.cache_path, f"_sample/{split}"), config.text_key
            )
        split_path = join_path(config.cache_path, split)
        num_groups = config.num_shard_groups or min(len(files), max(1, ray_cpus // 4))
        t0 = time.monotonic()
        try:
            _build_split(config, split, files, num_groups)
        except Exception as exc:  # noqa: BLE001 -- any failure to resume means: rebuild from scratch once
            logger.warning("resuming cache %s failed (%s); rebuilding it", split_path, exc)
            fs, p = filesystem(split_path)
            if fs.exists(p):
                fs.rm(p, recursive=True)
            _build_split(config, split, files, num_groups)
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
        "tokenizer": config.tokenizer,
        "splits": per_split,
    }
    atomic_write_bytes(join_path(config.cache_path, "tokenize_stats.json"), json.dumps(summary, indent=2).encode())
    return summary


TokenizerLike = ExecutorStep | InputName | str
DatasetLike = ExecutorStep | InputName | str | Sequence[ExecutorStep | InputName | str]


def _as_input(value: ExecutorStep | InputName | str) -> ExecutorStep | InputName:
    return InputName.hardcoded(value) if isinstance(value, str) else value


def _partitioned_by(value: ExecutorStep | InputName | str) -> str | None:
    step = value if isinstance(value, ExecutorStep) else getattr(value, "step", None)
    if isinstance(value, InputName) and value.all_partitions:
        return None
    return step.partitioned_by if step is not None else None


def default_tokenize(
    name: str,
    dataset: DatasetLike,
    tokenizer: TokenizerLike,
    format: str = "text",
    sample_count: int | None = None,
    is_validation: bool = False,
    validation: DatasetLike | None = None,
) -> ExecutorStep:
    """A step ``tokenized/<name>`` building a Levanter cache of ``dataset`` with ``tokenizer``.

    Args:
        name: step name suffix.
        dataset: documents: a step, ``InputName`` (e.g. ``step / "train"``), a path, or a list of them.
            A step partitioned by drops makes this step partitioned the same way.
        tokenizer: a tokenizer step or a local tokenizer directory.
        format: Levanter dataset format (``"text"``).
        sample_count: tokenize only the first N documents (versioned).
        is_validation: put ``dataset`` in the ``validation`` split instead of ``train``.
        validation: optional held-out documents for the ``validation`` split of the same cache.
    """
    items = list(dataset) if isinstance(dataset, (list, tuple)) else [dataset]
    inputs = [_as_input(x) for x in items]
    partitions = {p for p in (_partitioned_by(x) for x in items) if p is not None}
    if len(partitions) > 1:
        raise ValueError(f"dataset mixes partition sets {sorted(partitions)}")
    val_inputs = (
        [_as_input(x) for x in (list(validation) if isinstance(validation, (list, tuple)) else [validation])]
        if validation is not None
        else []
    )
    train_inputs, val_inputs = ([], inputs + val_inputs) if is_validation else (inputs, val_inputs)
    return ExecutorStep(
        name=f"tokenized/{name}",
        fn=tokenize,
        config=TokenizeConfig(
            train_paths=train_inputs,
            validation_paths=val_inputs,
            cache_path=this_output_path(),
            tokenizer=_as_input(tokenizer),
            format=versioned(format),
            sample_count=versioned(sample_count),
        ),
        description=f"Levanter token cache of {name} (train/ and validation/ splits).",
        pip_dependency_groups=["tokenize"],
        partitioned_by=partitions.pop() if partitions else None,
    )


def tokenized_split_paths(paths: str | Sequence[str], split: str) -> list[str]:
    """``<cache>/<split>`` for each cache root in ``paths`` (one per drop for a partitioned step)."""
    return [join_path(p, split) for p in as_path_list(paths) if os.path.basename(p) or True]
