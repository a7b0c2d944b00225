"""Shard I/O between the curation stages: JSON lines, compressed, streamed, sniffed by content.

Formats (Dolma-compatible): ``.jsonl.gz`` (gzip), ``.jsonl.zst`` (zstd) and plain ``.jsonl``.

Compression lives in :mod:`marin_assets.core.compression` (the one layer every reader uses):

* **Reading** (:func:`read_jsonl`, :func:`iter_line_blocks`) never trusts the file name: the
  first bytes decide (gzip, zstd, bz2, xz magic, else plain text), and the file is decompressed
  as a stream, a few MB at a time, so memory does not grow with the shard. A line that is not
  JSON raises :class:`ShardFormatError` naming the file and the line.
* **Writing** picks the compression from the name's suffix (``compression_for``): gzip through
  ISA-L (``isal``, ~3.5x zlib's speed at level 1) when installed, zstd through ``zstandard``.
  :func:`write_jsonl_shard` builds the file in memory (stage shards are bounded
  by ``docs_per_shard``) and writes it atomically; :class:`JsonlShardWriter` streams unbounded
  output to a temporary file / an upload that becomes visible only when closed without error.
  Either way a crash never leaves a half file that a rerun would mistake for a finished one.
* **JSON**: decoded by msgspec and encoded by orjson where they give the same result as
  :mod:`json` (the reference), by json where they do not (:func:`loadb`, :func:`dumpb`). What is
  written is always valid JSON: a float NaN, Infinity or -Infinity is written as the string
  ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` (the value kept, as the raw readers write it), never
  as the bare token :mod:`json` would write, which other JSON readers reject. Reading still
  accepts those tokens in files from elsewhere.
* **Stages** read with :func:`iter_records` (record + its line in the file) and write with
  :class:`JsonlShardWriter`; inside :func:`deferred_commits` the fsync + rename of each closed
  file runs in a helper thread while the stage goes on with the next shard.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from marin_assets.core.compression import Compression, Compressor, compression_for, open_decompressed
from marin_assets.execution.fence import check_fence
from marin_assets.execution.status import finite, is_non_finite_error
from marin_assets.execution.storage import (
    atomic_write_bytes,
    discard_upload,
    filesystem,
    is_local,
    join_path,
)
from marin_assets.execution.storage import read_json as read_json  # the one contract, re-exported

SHARD_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl")

try:  # orjson (optional): 2-3x faster on records; json stays the reference for what it rejects
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised where orjson is not installed
    _orjson = None

try:  # msgspec (optional): decodes like json (big ints stay ints) at orjson's speed
    import msgspec as _msgspec

    _DECODER = _msgspec.json.Decoder()
    _fast_loads: Any = _DECODER.decode
    _FastDecodeError: type[Exception] = _msgspec.DecodeError
except ImportError:  # pragma: no cover - exercised where msgspec is not installed
    _fast_loads = None
    _FastDecodeError = ValueError

# One encoder for every record: ``json.dumps(obj, **kwargs)`` builds a new JSONEncoder per call.
# allow_nan=False: a non-finite float raises, and :func:`finite` spells it as a string first.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_encode_unicode = _ENCODER.encode
_encode_ascii_strict = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

# Encoded+compressed in pieces of this many bytes; read in blocks of this many decompressed bytes.
_CHUNK = 4 << 20
BLOCK_BYTES = 4 << 20


class ShardFormatError(ValueError):
    """A shard line that is not a JSON record; the message names the file and the 1-based line."""


# ------------------------------------------------------------------------------------------
# JSON


def _encode(record: Any) -> str:
    try:
        return _encode_unicode(record)
    except ValueError as exc:  # a NaN/Infinity float (allow_nan=False): text (see the module docstring)
        if not is_non_finite_error(exc):
            raise
        return _encode_unicode(finite(record))


def _encode_ascii(record: Any) -> str:
    try:
        return _encode_ascii_strict(record)
    except ValueError as exc:
        if not is_non_finite_error(exc):
            raise
        return _encode_ascii_strict(finite(record))


def dumps(record: Any) -> str:
    """One compact JSON line (non-ASCII kept as is: smaller and faster than \\u escapes); a NaN or
    Infinity float is written as the string ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``, so every
    line is valid JSON."""
    return _encode(record)


def dumpb(record: Any) -> bytes:
    """UTF-8 bytes of :func:`dumps` ``(record)`` -- via orjson when it gives the same JSON.

    orjson writes NaN/Infinity as ``null``, so output holding ``null`` is re-encoded by
    :func:`dumps` (rare: records rarely hold null), which spells them as text; keys that are not
    strings, ints beyond 64 bits, lone surrogates: orjson raises and json decides (lone surrogates
    written as escapes, as UTF-8 cannot hold them). The only other difference is the spelling of
    some small floats (``1e-7`` vs ``1e-07``): the same value.
    """
    if _orjson is not None:
        try:
            out = _orjson.dumps(record)
        except TypeError:
            pass
        else:
            if b"null" not in out:
                return out
    try:
        return _encode(record).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \u-escaped, json reads it back as it was
        return _encode_ascii(record).encode("ascii")


def _no_fast_decoder(line: bytes) -> Any:
    raise _FastDecodeError("no fast decoder installed")


def loadb(line: bytes) -> Any:
    """``json.loads(line)`` -- via msgspec, which gives the same objects where it accepts the line.

    msgspec keeps integers of any size as ints (orjson would turn those beyond 64 bits into
    floats); what it rejects -- NaN/Infinity, lone surrogates, floats beyond the double range --
    json decides.
    """
    if _fast_loads is not None:
        try:
            return _fast_loads(line)
        except _FastDecodeError:
            pass
    return json.loads(line)


def parse_line(line: bytes, path: str, line_number: int) -> Any:
    """:func:`loadb` of one line; a line that is not JSON raises :class:`ShardFormatError`."""
    try:
        return loadb(line)
    except ValueError as exc:
        raise ShardFormatError(f"{path}:{line_number}: not a JSON record ({exc}): {line[:80]!r}") from exc


# ------------------------------------------------------------------------------------------
# Reading


def _cut_blocks(stream: IO[bytes], block_bytes: int) -> Iterator[bytes]:
    """The content of ``stream`` in blocks that end at a newline (the last one may not)."""
    rest = b""
    while True:
        piece = stream.read(block_bytes)
        if not piece:
            break
        cut = piece.rfind(b"\n") + 1
        if cut == 0:
            rest += piece
            continue
        yield b"".join((rest, memoryview(piece)[:cut]))  # one copy, whatever was left over
        rest = piece[cut:]
    if rest:
        yield rest


def iter_line_blocks(path: str, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, bytes]]:
    """``(first_line_number, block)`` pairs: the decompressed content in blocks of whole lines.

    Blocks hold about ``block_bytes`` bytes (more when one line is longer); ``first_line_number``
    is the 1-based number of the block's first line in the file. A missing final newline is fine.
    """
    line_number = 1
    for block in _blocks(path, block_bytes):
        yield line_number, block
        line_number += block.count(b"\n")


def _blocks(path: str, block_bytes: int) -> Iterator[bytes]:
    with open_decompressed(path) as stream:
        yield from _cut_blocks(stream, block_bytes)


def iter_block_records(block: bytes, path: str, first_line: int) -> Iterator[tuple[int, Any]]:
    """``(line_number, record)`` of every non-blank line of a block from :func:`iter_line_blocks`."""
    for offset, line in enumerate(block.split(b"\n")):
        if line and not line.isspace():
            yield first_line + offset, parse_line(line, path, first_line + offset)


def iter_records(path: str, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, Any]]:
    """``(line_number, record)`` of every non-blank line of a shard (1-based line numbers).

    Any format (sniffed), streamed a block at a time; a line that is not JSON raises
    :class:`ShardFormatError` naming the file and the line.
    """
    fast_loads = _fast_loads or _no_fast_decoder
    first_line = 1
    for block in _blocks(path, block_bytes):
        lines = block.split(b"\n")
        for line_number, line in enumerate(lines, first_line):
            if line and not line.isspace():
                try:  # loadb's fast path, inlined: this loop runs once per record of every stage
                    yield line_number, fast_loads(line)
                except _FastDecodeError:
                    yield line_number, parse_line(line, path, line_number)
        first_line += len(lines) - 1


def read_jsonl(path: str) -> Iterator[dict[str, Any]]:
    """Records of a JSON-lines shard, gzip / zstd / plain (sniffed), streamed a few MB at a time."""
    for _, record in iter_records(path):
        yield record


# The stages' historical name: every shard reader accepts every format.
read_jsonl_gz = read_jsonl


# ------------------------------------------------------------------------------------------
# Writing


def _encoded_chunks(records: Iterable[Any]) -> Iterator[bytes]:
    """JSON lines of ``records`` as UTF-8, grouped into pieces of about ``_CHUNK`` bytes."""
    lines: list[bytes] = []
    size = 0
    for record in records:
        line = dumpb(record)
        lines.append(line)
        size += len(line) + 1
        if size >= _CHUNK:
            lines.append(b"")
            yield b"\n".join(lines)
            lines, size = [], 0
    if lines:
        lines.append(b"")
        yield b"\n".join(lines)


def encode_jsonl(records: Iterable[Any], compression: Compression = "gzip") -> bytes:
    """The bytes of ``records`` as JSON lines, compressed piece by piece as they are encoded.

    The uncompressed text is never held whole; gzip output is one member with mtime 0, so
    identical input gives identical bytes.
    """
    comp = Compressor(compression)
    parts = [comp.compress(chunk) for chunk in _encoded_chunks(records)]
    parts.append(comp.flush())
    return b"".join(parts)


def write_jsonl_shard(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as JSON lines compressed as the suffix says; return bytes written."""
    data = encode_jsonl(records, compression_for(path))
    atomic_write_bytes(path, data)
    return len(data)


def write_jsonl_gz(path: str, records: Iterable[Any]) -> int:
    """Atomically write ``records`` as a gzipped JSON-lines file; return the number of bytes."""
    data = encode_jsonl(records, "gzip")
    atomic_write_bytes(path, data)
    return len(data)


class _Committer:
    """One thread that makes closed local shard files durable and visible (fsync, rename)."""

    def __init__(self) -> None:
        import concurrent.futures

        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="shard-commit")
        self._pending: list[Any] = []

    def submit(self, commit: Callable[[], None]) -> None:
        self._pending.append(self._pool.submit(commit))

    def wait(self) -> None:
        """Wait for every commit; raise the first error."""
        try:
            for future in self._pending:
                future.exception()
            for future in self._pending:
                future.result()
        finally:
            self._pool.shutdown()


_COMMITTER: contextvars.ContextVar[_Committer | None] = contextvars.ContextVar("marin_shard_committer", default=None)


@contextlib.contextmanager
def deferred_commits() -> Iterator[None]:
    """Local shard files closed inside the block are fsynced and renamed by a helper thread.

    The block goes on computing while the disk syncs; every file is committed (or the first
    error raised) before the block exits, so what a caller sees afterwards is the same as with
    synchronous commits. A file whose commit has not run yet stays a hidden temporary file: a
    process that dies meanwhile leaves nothing that looks finished.
    """
    committer = _Committer()
    token = _COMMITTER.set(committer)
    try:
        yield
    finally:
        _COMMITTER.reset(token)
        committer.wait()


class JsonlShardWriter:
    """Stream records to a JSON-lines shard (compressed as its suffix says) of any size.

    Local files go to a hidden temporary sibling renamed on :meth:`close`; object stores get a
    streamed upload that is committed on close and discarded if the block raises. Only a
    writer closed without error leaves a file at ``path``, and only while the running step still
    holds its lease (:func:`~marin_assets.execution.fence.check_fence`). Use as a context manager.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.records = 0
        self.bytes_written = 0
        self._comp = Compressor(compression_for(path))
        self._lines: list[bytes] = []
        self._pending = 0
        fs, p = filesystem(path)
        self._fs = fs
        if is_local(path):
            os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
            self._final: str | None = p
            self._tmp: str | None = os.path.join(os.path.dirname(p), f".tmp-{uuid.uuid4().hex}-{os.path.basename(p)}")
            self._file: Any = open(self._tmp, "wb")  # noqa: SIM115 -- closed by close()/abort()
        else:
            self._final = self._tmp = None
            self._file = fs.open(p, "wb")

    def write(self, record: Any) -> None:
        """Append one record."""
        line = dumpb(record)
        self._lines.append(line)
        self._pending += len(line) + 1
        self.records += 1
        if self._pending >= _CHUNK:
            self._drain()

    def _drain(self) -> None:
        if self._lines:
            self._lines.append(b"")
            self._put(self._comp.compress(b"\n".join(self._lines)))
            self._lines, self._pending = [], 0

    def _put(self, data: bytes) -> None:
        if data:
            self._file.write(data)
            self.bytes_written += len(data)

    def close(self) -> int:
        """Finish the file and make it visible at ``path``; returns the bytes written.

        If finishing fails (or the step's lease is lost), nothing appears at ``path``.
        """
        try:
            self._drain()
            self._put(self._comp.flush())
            check_fence()
        except BaseException:
            self.abort()
            raise
        if self._tmp is None:
            self._file.close()
        elif (committer := _COMMITTER.get()) is not None:
            committer.submit(self._commit_local)
        else:
            self._commit_local()
        return self.bytes_written

    def _commit_local(self) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self._final)  # type: ignore[arg-type]
        except BaseException:
            self._file.close()
            if os.path.exists(self._tmp):  # type: ignore[arg-type]
                os.unlink(self._tmp)  # type: ignore[arg-type]
            raise

    def abort(self) -> None:
        """Drop everything written so far; nothing appears at ``path``."""
        if self._tmp is not None:
            self._file.close()
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
        else:
            discard_upload(self._file)

    def __enter__(self) -> JsonlShardWriter:
        return self

    def __del__(self) -> None:
        # A writer dropped without close() (an exception outside a ``with``): fsspec's own file
        # would upload its buffer when collected; discard it instead.
        file = getattr(self, "_file", None)
        if file is not None and self._tmp is None and not file.closed:
            discard_upload(file)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_json(path: str, obj: Any) -> None:
    """Atomically write ``obj`` as indented JSON (a NaN/Infinity float as text, as in shards)."""
    try:
        text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:  # a non-finite float: text, so the file stays valid JSON
        if not is_non_finite_error(exc):
            raise
        text = json.dumps(finite(obj), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def list_files(directory: str, suffix: str | tuple[str, ...] = "") -> list[str]:
    """Sorted full paths (same scheme as ``directory``) of files directly below it ending in ``suffix``.

    Hidden and ``_``-prefixed names (temporary files, markers) are skipped.
    """
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
