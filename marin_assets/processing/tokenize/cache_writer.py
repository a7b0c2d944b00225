"""Our own writer of Levanter token caches: tokenizer speed, Levanter's on-disk format.

Levanter's builder (``levanter.store.cache``) tokenizes shard groups in Ray actors into
temporary caches and then copies them into the final one. This writer produces the same files
without the detour:

* **format** -- a split is a ``TreeStore``: per field of the tokenizer's output exemplar
  (``input_ids``, and ``token_type_ids`` for tokenizers that return it) a ``JaggedArrayStore``
  at ``<split>/<field>/{data,offsets}``: zarr3 arrays of the exemplar's dtype with Levanter's
  chunking (1 GiB shards of 256 k-element blosc/lz4 chunks), ``offsets[0]`` = rows,
  ``offsets[i]`` = end of row ``i``; plus ``shard_ledger.json`` (Levanter's ``CacheLedger``,
  same shard names and preprocessor metadata). ``TreeCache.load`` / ``train_lm`` read it as is.
* **tokens** -- exactly Levanter's ``BatchTokenizer`` (see :mod:`~marin_assets.processing.tokenize.cache_encoding`).
* **parallelism** -- this process streams each input file (gzip / zstd / plain, sniffed) in
  blocks of whole lines to workers (a local process pool sized by ``workers``, or Ray actors when
  the step itself runs on Ray), which parse JSON and call ``encode_batch``; results come back in
  order and are appended straight to the final arrays (no temporary caches, no copy phase), with
  a bounded number of blocks in flight.
* **resume** -- after each input file the arrays are flushed, ``offsets[0]`` is set and the
  ledger records the file as finished. A killed build resumes after the last finished file;
  rows written beyond it are ignored and overwritten. A ledger written with another tokenizer
  or file list is not resumed: the split is rebuilt.
* **storage** -- tensorstore's ``file`` and ``gcs`` drivers (``gs://``; ``TENSORSTORE_GCS_HTTP_URL``
  points it at an emulator), the ledger through fsspec. A write into a partly filled 1 GiB zarr
  shard makes tensorstore read and rewrite that shard, so writes are batched: one per input
  file, or earlier when ``flush_tokens`` tokens are buffered (default 16 M, 64 MB as int32).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from marin_assets.core.io import iter_line_blocks
from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path, read_bytes
from marin_assets.processing.tokenize.cache_encoding import (
    EncodedBlock,
    EncodingSpec,
    cache_format,
    encode_block,
    init_local_worker,
    warm_up,
)

logger = logging.getLogger(__name__)

LEDGER_FILE = "shard_ledger.json"
# Inputs smaller than this (stored bytes) are encoded in this process (the Rust tokenizer still
# uses every core): spawning worker processes costs ~1 s, more than they save on ~1 M tokens.
SMALL_INPUT_BYTES = 2 << 20
# Levanter's jagged_array constants: the chunking is part of the format (readers pass it when
# opening, and tensorstore rejects an array whose stored metadata differs).
READ_CHUNK_ELEMENTS = 256 * 1024
WRITE_CHUNK_ELEMENTS = READ_CHUNK_ELEMENTS * 512
ARRAY_LENGTH = 2**54
# Decompressed bytes per encoding task (~65 k tokens, ~0.1 s of one core) and bytes in flight per
# worker. Small tasks keep both cores busy to the end: with 1 MB ones the last block of a build
# (~0.4 s) ran on one core while the other waited. Same tokens and cache either way.
BLOCK_BYTES = 256 << 10
IN_FLIGHT_BYTES_PER_WORKER = 2 << 20


# ------------------------------------------------------------------------------------------
# Pools: a local process pool or Ray actors, both "submit now, results in order"


class _LocalPool:
    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn: the parent holds tensorstore / tokenizer threads, which fork would copy half-done.
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_local_worker
        )
        for _ in range(workers):  # starts every process now
            self._pool.submit(warm_up)

    def submit(self, spec: EncodingSpec, block: bytes, source: str, first_line: int) -> Any:
        return self._pool.submit(encode_block, spec, block, source, first_line)

    @staticmethod
    def result(handle: Any) -> EncodedBlock:
        return handle.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class _InlinePool:
    """``workers=1``: encode in this process (the tokenizer's own threads still use every core)."""

    def submit(self, spec: EncodingSpec, block: bytes, source: str, first_line: int) -> Any:
        return (spec, block, source, first_line)  # encoded in order by result(), like a worker's

    @staticmethod
    def result(handle: Any) -> EncodedBlock:
        return encode_block(*handle)

    def close(self) -> None:
        pass


class BlockEncoder:
    """A Ray actor holding one worker's tokenizer: ``workers`` actors = ``workers`` Ray workers."""

    def __init__(self) -> None:
        init_local_worker()

    def encode(self, spec: EncodingSpec, block: bytes, source: str, first_line: int) -> EncodedBlock:
        return encode_block(spec, block, source, first_line)


class _RayPool:
    def __init__(self, workers: int) -> None:
        import ray

        self._ray = ray
        actor = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)(BlockEncoder)
        self._actors = [actor.remote() for _ in range(workers)]
        self._spec_ref: Any = None
        self._submitted = 0

    def submit(self, spec: EncodingSpec, block: bytes, source: str, first_line: int) -> Any:
        if self._spec_ref is None:
            self._spec_ref = self._ray.put(spec)
        actor = self._actors[self._submitted % len(self._actors)]
        self._submitted += 1
        return actor.encode.remote(self._spec_ref, block, source, first_line)

    def result(self, handle: Any) -> EncodedBlock:
        return self._ray.get(handle)

    def close(self) -> None:
        for actor in self._actors:
            self._ray.kill(actor)


def _make_pool(backend: str, workers: int):
    import multiprocessing

    if backend == "ray":
        return _RayPool(workers)
    if workers <= 1 or multiprocessing.current_process().daemon:  # a daemonic process may not fork children
        return _InlinePool()
    return _LocalPool(workers)


# ------------------------------------------------------------------------------------------
# Storage: Levanter's zarr3 arrays through tensorstore


def zarr_spec(path: str) -> dict[str, Any]:
    """The tensorstore spec Levanter's ``JaggedArrayStore`` opens ``path`` with (same metadata)."""
    if path.startswith("gs://"):
        bucket, _, key = path[len("gs://") :].partition("/")
        kvstore: dict[str, Any] = {"driver": "gcs", "bucket": bucket, "path": key}
    elif "://" in path and not path.startswith("file://"):
        raise ValueError(f"the marin cache writer supports local paths and gs://, not {path}")
    else:
        kvstore = {"driver": "file", "path": os.path.abspath(path.removeprefix("file://"))}
    return {
        "driver": "zarr3",
        "kvstore": kvstore,
        "metadata": {
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [WRITE_CHUNK_ELEMENTS]}},
            "codecs": [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": [READ_CHUNK_ELEMENTS],
                        "codecs": [{"name": "blosc", "configuration": {"clevel": 5}}],
                    },
                }
            ],
        },
    }


def _open_array(path: str, dtype: str):
    import tensorstore as ts

    if "://" not in path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return ts.open(
        zarr_spec(path), dtype=dtype, shape=[ARRAY_LENGTH], open=True, create=True, delete_existing=False
    ).result()


class _JaggedAppender:
    """Appends rows to one ``JaggedArrayStore`` (data + offsets), committing rows explicitly."""

    def __init__(self, split_path: str, field: str, dtype: str) -> None:
        self.dtype = dtype
        self.data = _open_array(join_path(split_path, f"{field}/data"), dtype)
        self.offsets = _open_array(join_path(split_path, f"{field}/offsets"), "int64")
        self.rows = 0
        self.size = 0
        self._pending: list[Any] = []

    def resume_at(self, rows: int) -> None:
        """Continue after ``rows`` committed rows (anything written after them is ignored)."""
        self.rows = rows
        self.size = int(self.offsets[rows].read().result()) if rows else 0
        self.offsets[0].write(rows).result()

    def write(self, lengths: np.ndarray, values: np.ndarray | None) -> None:
        """Start writing ``len(lengths)`` rows (``values`` None: all zeros, nothing to store)."""
        self.wait()
        n, total = len(lengths), int(lengths.sum())
        ends = np.cumsum(lengths, dtype=np.int64) + self.size
        self._pending.append(self.offsets[self.rows + 1 : self.rows + 1 + n].write(ends))
        if values is not None and total:
            self._pending.append(self.data[self.size : self.size + total].write(values.astype(self.dtype, copy=False)))
        self.rows += n
        self.size += total

    def wait(self) -> None:
        for future in self._pending:
            future.result()
        self._pending = []

    def commit(self) -> None:
        """Make the rows written so far visible: wait for the writes, then ``offsets[0] = rows``."""
        self.wait()
        self.offsets[0].write(self.rows).result()


# ------------------------------------------------------------------------------------------
# The build


def shard_names(files: Sequence[str]) -> list[str]:
    """Levanter's shard names for ``files`` (``UrlDataSource``: common prefix cut, '.' -> '_')."""
    prefix = os.path.dirname(files[0]) if len(files) == 1 else os.path.commonprefix(list(files))
    names = []
    for url in files:
        name = url[len(prefix) :].lstrip("/") if prefix else url
        names.append(name.replace(".", "_"))
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate shard names for {list(files)}")
    return names


def read_cache_ledger(split_path: str) -> dict[str, Any] | None:
    """The parsed ``shard_ledger.json`` of a cache split, or None."""
    import json

    data = read_bytes(join_path(split_path, LEDGER_FILE))
    return None if data is None else json.loads(data)


def _write_ledger(split_path: str, ledger: dict[str, Any]) -> None:
    import json

    atomic_write_bytes(join_path(split_path, LEDGER_FILE), json.dumps(ledger).encode())


def _new_ledger(names: Sequence[str], metadata: dict[str, Any]) -> dict[str, Any]:
    # Key order and fields of Levanter's CacheLedger.to_json().
    return {
        "total_num_rows": 0,
        "shard_rows": {name: 0 for name in names},
        "is_finished": False,
        "finished_shards": [],
        "field_counts": {},
        "metadata": {"preprocessor_metadata": metadata},
    }


def _resumable(ledger: dict[str, Any] | None, names: list[str], metadata: dict[str, Any]) -> bool:
    if ledger is None:
        return False
    finished = ledger.get("finished_shards", [])
    return (
        (ledger.get("metadata") or {}).get("preprocessor_metadata") == metadata
        and list(ledger.get("shard_rows", {})) == names
        and finished == names[: len(finished)]
    )


def _total_bytes(files: Sequence[str]) -> int:
    """Stored size of ``files`` (as large as can be when there are too many to ask cheaply)."""
    if len(files) > 64:
        return 1 << 62
    total = 0
    for path in files:
        fs, p = filesystem(path)
        total += int(fs.size(p) or 0)
    return total


def _remove(path: str) -> None:
    fs, p = filesystem(path)
    if fs.exists(p):
        fs.rm(p, recursive=True)


def build_cache(
    files: Sequence[str],
    split_path: str,
    tokenizer: str,
    *,
    text_key: str = "text",
    workers: int = 1,
    backend: str = "local",
    block_bytes: int = BLOCK_BYTES,
    flush_tokens: int = 16 << 20,
) -> dict[str, Any]:
    """Build (or resume, or find finished) the Levanter cache of ``files`` at ``split_path``.

    Args:
        files: JSON-lines documents (gzip / zstd / plain), in cache order.
        split_path: the split directory (``<cache>/<split>``), local or ``gs://``.
        tokenizer: a tokenizer directory (local or remote) transformers loads.
        text_key: the field holding the text.
        workers: encoding processes (``backend="local"``; 1, or inputs under ``SMALL_INPUT_BYTES``,
            encode in this process) or Ray actors (``backend="ray"``, one CPU each);
            ``IN_FLIGHT_BYTES_PER_WORKER`` of blocks (at least two) in flight per worker.
        backend: ``"local"`` (process pool) or ``"ray"`` (tasks on the connected cluster).
        block_bytes: decompressed bytes of whole lines per task (``BLOCK_BYTES``).
        flush_tokens: buffered tokens that trigger a write before the end of a file.

    Returns:
        ``{"documents", "tokens", "shards", "resumed_shards", "seconds", "finished"}``.
    """
    start = time.monotonic()
    files = list(files)
    if backend == "local" and workers > 1 and _total_bytes(files) < SMALL_INPUT_BYTES:
        workers = 1  # starting worker processes would cost more than they save
    ledger = read_cache_ledger(split_path)
    pools: list[Any] = []

    def pool() -> Any:
        if not pools:
            pools.append(_make_pool(backend, workers))
        return pools[0]

    if ledger is None or not ledger.get("is_finished"):
        pool()  # start the workers now: their start-up (seconds on a busy machine) overlaps the setup
    try:
        return _build(files, split_path, tokenizer, ledger, pool, text_key, workers, block_bytes, flush_tokens, start)
    finally:
        for started in pools:
            started.close()


def _build(
    files: list[str],
    split_path: str,
    tokenizer: str,
    ledger: dict[str, Any] | None,
    get_pool: Callable[[], Any],
    text_key: str,
    workers: int,
    block_bytes: int,
    flush_tokens: int,
    start: float,
) -> dict[str, Any]:
    fmt = cache_format(tokenizer, text_key)
    names = shard_names(files) if files else []
    if ledger is not None and ledger.get("is_finished") and _resumable(ledger, names, fmt.metadata):
        return _summary(ledger, resumed=len(names), start=start)
    pool = get_pool()
    if ledger is not None and not _resumable(ledger, names, fmt.metadata):
        logger.warning("cache %s was written with other inputs or another tokenizer; rebuilding it", split_path)
        _remove(split_path)
        ledger = None
    if ledger is None:
        _remove(split_path)  # arrays of an attempt that died before its first ledger
        ledger = _new_ledger(names, fmt.metadata)
    appenders = {field: _JaggedAppender(split_path, field, dtype) for field, dtype in fmt.dtypes.items()}
    for appender in appenders.values():
        appender.resume_at(int(ledger["total_num_rows"]))
    resumed = len(ledger["finished_shards"])
    window = max(2, workers * max(1, IN_FLIGHT_BYTES_PER_WORKER // block_bytes))
    todo = [(i, path) for i, path in enumerate(files) if i >= resumed]
    buffer = _Buffer()
    in_flight: deque[tuple[str, Any]] = deque()
    for item in _work_items(todo, block_bytes):
        if item[0] == "block":
            _, path, first_line, block = item
            in_flight.append(("block", pool.submit(fmt.spec, block, path, first_line)))
        else:
            in_flight.append(item)
        while len(in_flight) > window or (in_flight and in_flight[0][0] == "end"):
            _consume(in_flight.popleft(), pool, buffer, appenders, flush_tokens, split_path, names, ledger)
    while in_flight:
        _consume(in_flight.popleft(), pool, buffer, appenders, flush_tokens, split_path, names, ledger)
    ledger["field_counts"] = {"input_ids": appenders["input_ids"].size}
    ledger["is_finished"] = True
    _write_ledger(split_path, ledger)
    return _summary(ledger, resumed=resumed, start=start)


def _consume(
    item: tuple[str, Any],
    pool: Any,
    buffer: _Buffer,
    appenders: dict[str, _JaggedAppender],
    flush_tokens: int,
    split_path: str,
    names: list[str],
    ledger: dict[str, Any],
) -> None:
    """Take the oldest in-flight item: buffer a block's tokens, or finish a file (commit + ledger)."""
    kind, payload = item
    if kind == "block":
        buffer.add(pool.result(payload))
        if buffer.tokens >= flush_tokens:
            buffer.flush(appenders)
    else:  # every block of file ``payload`` is in: flush, commit, record it finished
        buffer.flush(appenders)
        for appender in appenders.values():
            appender.commit()
        name = names[payload]
        rows = appenders["input_ids"].rows
        ledger["shard_rows"][name] = rows - int(ledger["total_num_rows"])
        ledger["total_num_rows"] = rows
        ledger["finished_shards"].append(name)
        ledger["field_counts"] = {"input_ids": appenders["input_ids"].size}
        _write_ledger(split_path, ledger)


def _work_items(todo: list[tuple[int, str]], block_bytes: int) -> Iterator[tuple]:
    """``("block", path, first_line, bytes)`` for every block, ``("end", index)`` after each file."""
    for index, path in todo:
        for first_line, block in iter_line_blocks(path, block_bytes):
            yield ("block", path, first_line, block)
        yield ("end", index)


class _Buffer:
    """Encoded blocks waiting to be written together."""

    def __init__(self) -> None:
        self.blocks: list[EncodedBlock] = []
        self.tokens = 0

    def add(self, block: EncodedBlock) -> None:
        self.blocks.append(block)
        self.tokens += len(block.input_ids)

    def flush(self, appenders: dict[str, _JaggedAppender]) -> None:
        if not self.blocks:
            return
        lengths = np.concatenate([b.lengths for b in self.blocks])
        ids = np.concatenate([b.input_ids for b in self.blocks])
        appenders["input_ids"].write(lengths, ids)
        if "token_type_ids" in appenders:
            any_types = any(b.token_type_ids is not None for b in self.blocks)
            types = (
                np.concatenate(
                    [
                        b.token_type_ids if b.token_type_ids is not None else np.zeros_like(b.input_ids)
                        for b in self.blocks
                    ]
                )
                if any_types
                else None
            )
            appenders["token_type_ids"].write(lengths, types)
        self.blocks, self.tokens = [], 0


def _summary(ledger: dict[str, Any], resumed: int, start: float) -> dict[str, Any]:
    return {
        "documents": int(ledger["total_num_rows"]),
        "tokens": int((ledger.get("field_counts") or {}).get("input_ids", 0)),
        "shards": len(ledger["shard_rows"]),
        "resumed_shards": resumed,
        "seconds": round(time.monotonic() - start, 3),
        "finished": bool(ledger["is_finished"]),
    }
