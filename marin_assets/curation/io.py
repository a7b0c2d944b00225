"""Shared I/O for the curation stages: jsonl(.gz) shards over fsspec, atomic writes, task fan-out.

Every file a stage writes goes through :func:`write_jsonl_gz` / :func:`write_json`, which build the
whole file in memory and write it atomically, so a crash never leaves a half file that a rerun
would mistake for a finished one (shards are bounded by ``docs_per_shard``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path, read_bytes

R = TypeVar("R")

# gzip level 3: ~4x faster than the default 9 and only a few percent larger on text.
GZIP_LEVEL = 3


def dumps(record: Any) -> str:
    """One compact JSON line (non-ASCII kept as is: smaller and faster than \\u escapes)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def encode_jsonl_gz(records: Iterable[Any]) -> bytes:
    """The gzip bytes of ``records`` as JSON lines (mtime 0: identical input, identical bytes)."""
    text = "".join(dumps(r) + "\n" for r in records)
    return gzip.compress(text.encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)


def write_jsonl_gz(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as a gzipped JSON-lines file; return the number of bytes."""
    data = encode_jsonl_gz(records)
    atomic_write_bytes(path, data)
    return len(data)


def write_jsonl(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as plain JSON lines; return the number of bytes."""
    data = "".join(dumps(r) + "\n" for r in records).encode("utf-8")
    atomic_write_bytes(path, data)
    return len(data)


def read_jsonl_gz(path: str) -> Iterator[dict[str, Any]]:
    """Records of a (gzipped when the name ends in .gz) JSON-lines file written by a stage."""
    data = read_bytes(path)
    if data is None:
        raise FileNotFoundError(path)
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    for line in io.BytesIO(data):
        if line.strip():
            yield json.loads(line)


def write_json(path: str, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON."""
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def read_json(path: str) -> Any:
    """Parsed JSON at ``path`` (FileNotFoundError when missing)."""
    data = read_bytes(path)
    if data is None:
        raise FileNotFoundError(path)
    return json.loads(data)


def list_files(directory: str, suffix: str = "") -> list[str]:
    """Sorted full paths (same scheme as ``directory``) of files directly below it ending in ``suffix``."""
    fs, p = filesystem(directory)
    try:
        entries = fs.ls(p, detail=True)
    except FileNotFoundError:
        return []
    names = sorted(
        os.path.basename(e["name"].rstrip("/"))
        for e in entries
        if e.get("type") == "file" and e["name"].endswith(suffix)
    )
    return [join_path(directory, n) for n in names if not n.startswith((".", "_"))]


def shard_name(index: int, suffix: str = ".jsonl.gz") -> str:
    """Name of shard ``index`` (zero-padded so lexical order is shard order)."""
    return f"shard-{index:05d}{suffix}"


def map_tasks(fn: Callable[..., R], args: Sequence[tuple], use_ray: bool, num_cpus: float = 1) -> list[R]:
    """``[fn(*a) for a in args]``, as parallel Ray tasks when ``use_ray`` (results in input order).

    ``fn`` must be a module-level function so Ray workers can import it.
    """
    if not use_ray or len(args) == 0:
        return [fn(*a) for a in args]
    import ray

    from marin_resources.ray_cluster import ensure_ray

    ensure_ray()
    remote = ray.remote(num_cpus=num_cpus, max_retries=2)(fn)
    return ray.get([remote.remote(*a) for a in args])
