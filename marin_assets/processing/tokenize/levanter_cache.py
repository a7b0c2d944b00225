"""Tokenized caches as steps: Levanter token caches written by our own writer (or Levanter's).

``default_tokenize`` turns a documents directory (jsonl / jsonl.gz / jsonl.zst with a ``text``
field) into a Levanter ``TreeCache`` with ``train/`` and ``validation/`` splits, exactly the
layout Levanter's ``LMMixtureDatasetConfig`` reads (``<cache_dir>/<split>``). When the documents
step is partitioned by data drop, the tokenize step is partitioned the same way: one cache per
drop, so a new drop only tokenizes that drop.

Two writers, chosen by ``TokenizeConfig.writer`` (not versioned: both write the same tokens):

* ``"marin"`` (default): :mod:`marin_assets.processing.tokenize.cache_writer` -- parallel ``encode_batch``
  in a local process pool (Ray actors when the step itself runs on Ray), appended in order
  straight into the final arrays. A split is finished when its ``shard_ledger.json`` says
  ``is_finished``; a killed build resumes after the last finished input file.
* ``"levanter"``: Levanter's own builder on Ray, kept for comparison. Crash safety comes from
  Levanter; if resuming fails (e.g. the options changed) the split is deleted and rebuilt.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from marin_assets.core.documents import as_path_list, iter_texts, list_document_files
from marin_assets.core.io import write_jsonl_gz
from marin_assets.execution.step import ExecutorStep, InputName, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path
from marin_assets.processing.tokenize.cache_writer import build_cache, read_cache_ledger

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation")


@dataclass(frozen=True)
class TokenizeConfig:
    """Config of :func:`tokenize`."""

    train_paths: Sequence[str] | str
    """Document directories/files for the ``train`` split (may be empty)."""
    validation_paths: Sequence[str] | str
    """Document directories/files for the ``validation`` split (may be empty)."""
    cache_path: str
    """The cache root; splits go to ``<cache_path>/<split>``."""
    tokenizer: str
    """A tokenizer directory (``AutoTokenizer``-loadable, local or remote)."""
    format: str = "text"
    """Levanter dataset format: ``"text"`` (the ``text_key`` field of each record)."""
    text_key: str = "text"
    """The field holding the text."""
    sample_count: int | None = None
    """Tokenize only the first ``sample_count`` documents of each split (None: all)."""
    writer: Literal["marin", "levanter"] = "marin"
    """``"marin"``: our cache writer (:mod:`~marin_assets.processing.tokenize.cache_writer`); ``"levanter"``:
    Levanter's Ray builder, for comparison. Same files and tokens either way."""
    workers: int | None = None
    """Marin writer: encoding processes (None: the CPUs this process may use); when the step runs
    on Ray, Ray actors of one CPU each (None: the cluster's free CPUs)."""
    num_shard_groups: int | None = None
    """Levanter writer: shard groups (parallel tokenizer tasks); None picks
    ``min(files, max(1, ray_cpus // 4))`` -- few groups on small clusters avoids the builder
    deadlock where a copy task waits for CPUs held by tokenizer tasks."""
    batch_size: int = 128
    """Levanter writer: documents per tokenizer call."""
    timeout_s: float = 3600.0
    """Levanter writer: fail instead of hanging when a build takes longer than this."""


def _sampled_files(files: list[str], sample_count: int, dest: str, text_key: str) -> list[str]:
    """Write the first ``sample_count`` documents of ``files`` to one file under ``dest``."""
    path = join_path(dest, "sample-00000.jsonl.gz")
    write_jsonl_gz(path, ({text_key: text} for text in itertools.islice(iter_texts(files, text_key), sample_count)))
    return [path]


def read_ledger(split_path: str) -> dict | None:
    """The parsed ``shard_ledger.json`` of a cache split, or None."""
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


def _ray_cpus() -> int:
    from marin_resources.ray_cluster import ensure_ray

    return int(ensure_ray().get("CPU", 1))


def _build_split_levanter(config: TokenizeConfig, split: str, files: list[str]) -> None:
    """Levanter's builder on Ray; a split that fails to resume is deleted and built once more."""
    from levanter.data.text import TextLmDatasetFormat, UrlSingleDatasetLMConfig
    from levanter.store.cache import CacheOptions

    num_groups = config.num_shard_groups or min(len(files), max(1, _ray_cpus() // 4))
    urls = {"train_urls": files} if split == "train" else {"validation_urls": files}
    data = UrlSingleDatasetLMConfig(
        tokenizer=config.tokenizer,
        cache_dir=config.cache_path,
        cache_options=CacheOptions(num_shard_groups=num_groups, batch_size=config.batch_size),
        format=TextLmDatasetFormat(text_key=config.text_key),
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


def _in_ray_task() -> bool:
    if "ray" not in sys.modules:  # never import Ray just to find out
        return False
    import ray

    if not ray.is_initialized():
        return False
    context = ray.get_runtime_context()
    # get_task_id() logs a warning in a driver; only a worker process runs tasks.
    return context.worker.mode == ray.WORKER_MODE and context.get_task_id() is not None


def marin_writer_placement(workers: int | None) -> tuple[str, int]:
    """``(backend, workers)`` of the marin writer: Ray actors when the step runs on Ray, else processes.

    The engine launches a step that declares ``resources`` as a Ray task; its blocks then go to
    ``workers`` Ray actors of one CPU each (default: the CPUs the cluster has free, so that every
    actor can start). A step run in process uses a local pool of ``workers`` processes (default:
    the CPUs this process may use).
    """
    if _in_ray_task():
        import ray

        return "ray", workers or max(1, int(ray.available_resources().get("CPU", 1)))
    return "local", workers or len(os.sched_getaffinity(0))


def tokenize(config: TokenizeConfig) -> dict:
    """Build (or resume, or load) the Levanter cache of every split that has documents.

    Returns step metadata: documents, tokens, tokens/s and the cache path (per split and total).
    """
    if config.format != "text":
        raise ValueError(f"only the 'text' format is supported here, got {config.format!r}")
    if config.writer not in ("marin", "levanter"):
        raise ValueError(f"writer must be 'marin' or 'levanter', got {config.writer!r}")
    start = time.monotonic()
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
        t0 = time.monotonic()
        if config.writer == "marin":
            backend, workers = marin_writer_placement(config.workers)
            build_cache(files, split_path, config.tokenizer, text_key=config.text_key, workers=workers, backend=backend)
        else:
            _build_split_levanter(config, split, files)
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
        "writer": config.writer,
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
    writer: Literal["marin", "levanter"] = "marin",
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
        writer: who writes the cache (:attr:`TokenizeConfig.writer`); not versioned, as both
            writers store the same tokens.
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
            writer=writer,
        ),
        description=f"Levanter token cache of {name} (train/ and validation/ splits).",
        pip_dependency_groups=["tokenize"],
        partitioned_by=partitions.pop() if partitions else None,
    )


def tokenized_split_paths(paths: str | Sequence[str], split: str) -> list[str]:
    """``<cache>/<split>`` for each cache root in ``paths`` (one per drop for a partitioned step)."""
    return [join_path(p, split) for p in as_path_list(paths) if os.path.basename(p) or True]
