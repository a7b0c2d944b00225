"""Shared I/O for the curation stages: jsonl(.gz) shards over fsspec, atomic writes, task fan-out.

Every file a stage writes goes through :func:`write_jsonl_gz` / :func:`write_json`, which build the
whole file in memory and write it atomically, so a crash never leaves a half file that a rerun
would mistake for a finished one (shards are bounded by ``docs_per_shard``).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from marin_assets.execution.storage import atomic_write_bytes, filesystem, join_path, read_bytes

R = TypeVar("R")

# gzip level 1 for the stage shards: they are intermediate files read once or twice by the next
# stages, so compression speed matters more than the ~8% larger files (level 3 was ~1.5x slower
# to write, level 9 ~6x).
GZIP_LEVEL = 1

# One encoder for every record: ``json.dumps(obj, **kwargs)`` builds a new JSONEncoder
# per call, which costs as much as encoding a small record.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_encode = _ENCODER.encode

try:  # orjson (optional): 2-3x faster on records; json stays the reference for what it rejects
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    _orjson = None

# Pieces a shard is encoded+compressed in (bytes) and decompressed in (compressed bytes): bounds
# the extra memory to a few MB per shard instead of the whole text and its copies.
_CHUNK = 4 << 20
_GZ_IN = 1 << 20


def dumps(record: Any) -> str:
    """One compact JSON line (non-ASCII kept as is: smaller and faster than \\u escapes)."""
    return _encode(record)


def _dumpb(record: Any) -> bytes:
    """UTF-8 bytes of :func:`dumps` ``(record)`` -- via orjson when it gives the same JSON.

    orjson writes NaN/Infinity as ``null`` where json writes ``NaN``, so output holding ``null``
    is re-encoded with json (rare: records rarely hold null); keys that are not strings, ints
    beyond 64 bits, lone surrogates: orjson raises and json decides. The only other difference
    is the spelling of some small floats (``1e-7`` vs ``1e-07``): the same value.
    """
    if _orjson is not None:
        try:
            out = _orjson.dumps(record)
        except TypeError:
            pass
        else:
            if b"null" not in out:
                return out
    return _encode(record).encode("utf-8")


# ``line.translate(_DIGITS).find(_LONG_NUMBER)``: a run of 19+ digits, i.e. possibly an integer
# beyond 64 bits, which orjson would turn into a float (json keeps the int). ~1 us per KB.
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
_LONG_NUMBER = b"0" * 19


def _loadb(line: bytes) -> Any:
    """``json.loads(line)`` -- via orjson when it gives the same objects.

    orjson rejects NaN/Infinity, lone surrogates and too-large floats (json decides then), and
    turns integers beyond 64 bits into floats, so a line with 19+ consecutive digits anywhere
    (a long number, or such a run inside a string) is parsed by json.
    """
    if _orjson is not None and line.translate(_DIGITS).find(_LONG_NUMBER) < 0:
        try:
            return _orjson.loads(line)
        except ValueError:
            pass
    return json.loads(line)


def _encoded_chunks(records: Iterable[Any]) -> Iterator[bytes]:
    """JSON lines of ``records`` as UTF-8, grouped into pieces of about ``_CHUNK`` bytes."""
    lines: list[bytes] = []
    size = 0
    for record in records:
        line = _dumpb(record)
        lines.append(line)
        size += len(line) + 1
        if size >= _CHUNK:
            lines.append(b"")
            yield b"\n".join(lines)
            lines, size = [], 0
    if lines:
        lines.append(b"")
        yield b"\n".join(lines)


def encode_jsonl_gz(records: Iterable[Any]) -> bytes:
    """The gzip bytes of ``records`` as JSON lines (mtime 0: identical input, identical bytes).

    Compressed piece by piece as records are encoded, so the uncompressed text is never held
    whole; the output is one gzip member, the same stream ``gzip.compress(text, mtime=0)`` makes.
    """
    comp = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip container, mtime 0
    parts = [comp.compress(chunk) for chunk in _encoded_chunks(records)]
    parts.append(comp.flush())
    return b"".join(parts)


def write_jsonl_gz(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as a gzipped JSON-lines file; return the number of bytes."""
    data = encode_jsonl_gz(records)
    atomic_write_bytes(path, data)
    return len(data)


def write_jsonl(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as plain JSON lines; return the number of bytes."""
    data = b"".join(_encoded_chunks(records))
    atomic_write_bytes(path, data)
    return len(data)


def _gunzip_chunks(data: bytes) -> Iterator[bytes]:
    """Decompressed pieces of gzip ``data`` (fed ``_GZ_IN`` bytes at a time), members concatenated."""
    view = memoryview(data)
    pos, end = 0, len(view)
    decomp, fed = zlib.decompressobj(wbits=31), False
    while pos < end:
        stop = min(pos + _GZ_IN, end)
        piece = decomp.decompress(view[pos:stop])
        fed, pos = True, stop
        if piece:
            yield piece
        if decomp.eof:  # end of a member: the next one (if any) starts at the unused input
            pos -= len(decomp.unused_data)
            while pos < end and view[pos] == 0:  # zero padding between members is allowed
                pos += 1
            decomp, fed = zlib.decompressobj(wbits=31), False
    if fed:
        piece = decomp.flush()
        if piece:
            yield piece
        if not decomp.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")


def read_jsonl_gz(path: str) -> Iterator[dict[str, Any]]:
    """Records of a (gzipped when the name ends in .gz) JSON-lines file written by a stage.

    Decompresses a few MB at a time, so only the compressed file and one piece are in memory.
    """
    data = read_bytes(path)
    if data is None:
        raise FileNotFoundError(path)
    pieces: Iterable[bytes] = _gunzip_chunks(data) if path.endswith(".gz") else (data,)
    rest = b""
    for piece in pieces:
        if rest:
            piece = rest + piece
        lines = piece.split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line and not line.isspace():
                yield _loadb(line)
    if rest and not rest.isspace():
        yield _loadb(rest)


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
