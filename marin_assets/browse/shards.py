"""Page through the records of one shard without reading the whole shard.

Formats: ``.jsonl`` / ``.ndjson``, their ``.gz`` and ``.zst`` forms (and Dolma's ``.json.gz``) and
``.parquet``, on any fsspec filesystem. A page is addressed by the index of its first record.

The compression of a JSON-lines shard is sniffed from its first bytes, whatever its name says
(:mod:`marin_assets.core.compression`, the layer every reader uses):

* plain: a page starts at a remembered byte offset (``seek``).
* gzip: a page starts at a remembered *decompressor state* -- the compressed offset, a copy of
  the zlib stream object and the few decompressed bytes not yet split into lines -- so page N+1
  continues where page N stopped instead of decompressing the shard from its start again.
* zstd (also bz2, xz): such streams cannot be copied, so the live reader that stopped at the end
  of a page is remembered (once: the next page takes it over).
* parquet: the footer's row-group sizes locate the row group holding a record; only that row group
  is read, through a small buffer (a data page at a time, never a whole column chunk) in batches of
  a few rows -- so one huge row group costs time to skip through, not memory. A footer, or a data
  page, over the read limit (``--max_read_mib``) is not decoded: the page says what it left out
  (:mod:`marin_assets.browse.parquet_pages`, :mod:`marin_assets.core.parquet_layout`).

A JSON line longer than :data:`MAX_LINE_BYTES` is dropped as it arrives and shown as an error
record: a request's memory is bounded whatever the layout of the file.

Checkpoints are kept in one small LRU (:class:`Checkpoints`), so the memory of a long paging session
stays flat. A page asked for with no checkpoint at or before it streams from the nearest one (or
the start) and skips records: slower, never bigger.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from marin_assets.browse.parquet_pages import FOOTER_SHARE, MAX_READ_BYTES, SETTING, LayoutCache, not_shown
from marin_assets.browse.paths import fresh_filesystem
from marin_assets.core.compression import Compression, new_decompressor, open_stream, sniff_compression
from marin_assets.core.parquet_layout import ParquetTooLarge, check_footer, oversized_fields

# Compressed bytes read at a time, and the most decompressed bytes one step may produce (keeps a
# highly compressible shard from decompressing into a huge buffer).
_READ = 256 << 10
_MAX_OUT = 1 << 20
# A longer line is skipped unread (its bytes dropped as they arrive) and shown as an error record:
# what one request holds is bounded by this, whatever the shard's lines.
MAX_LINE_BYTES = 8 << 20
# Parquet: column chunks are read through a buffer of this size (a page at a time, not the whole
# row group), and a page decodes batches of at most this many rows.
PARQUET_BUFFER_BYTES = 1 << 20
PARQUET_BATCH_ROWS = 64

# Plain ``.json`` is one document, not records; Dolma names its jsonl shards ``.json.gz``.
JSONL_SUFFIXES = (".jsonl", ".ndjson")
COMPRESSED_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
SHARD_SUFFIXES = (
    *JSONL_SUFFIXES,
    *(s + ".gz" for s in COMPRESSED_JSONL_SUFFIXES),
    *(s + ".zst" for s in COMPRESSED_JSONL_SUFFIXES),
    *(s + ".zstd" for s in COMPRESSED_JSONL_SUFFIXES),
    ".parquet",
)


def shard_format(path: str) -> str | None:
    """``"jsonl"``, ``"gz"``, ``"zst"``, ``"parquet"`` by the name -- or None when ``path`` is no record
    shard. The name only says which files are shards: :class:`LineSource` sniffs the compression."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        return "parquet"
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl"
    for suffix in COMPRESSED_JSONL_SUFFIXES:
        if lower.endswith(suffix + ".gz"):
            return "gz"
        if lower.endswith((suffix + ".zst", suffix + ".zstd")):
            return "zst"
    return None


class OversizedLine(bytes):
    """Stands for a line longer than :data:`MAX_LINE_BYTES`, skipped without being held."""

    size: int

    def __new__(cls, size: int) -> OversizedLine:
        line = super().__new__(cls, b"")
        line.size = size
        return line


def parse_line(line: bytes, index: int) -> dict[str, Any]:
    """The record of one JSON line; a bad line becomes ``{"_error": ...}`` (shown, never fatal)."""
    if isinstance(line, OversizedLine):
        return {"_error": f"record {index}: a line of {line.size} bytes, over {MAX_LINE_BYTES} -- not read"}
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return {"_error": f"record {index}: not JSON ({str(exc)[:100]})", "_raw": line[:300].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"_value": value}


class Checkpoints:
    """An LRU of resume points ``(path, fingerprint, record index) -> state``, shared by all shards."""

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self._items: OrderedDict[tuple[str, str, int], Any] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, path: str, fingerprint: str, index: int, state: Any) -> None:
        with self._lock:
            key = (path, fingerprint, index)
            self._items[key] = state
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def nearest(self, path: str, fingerprint: str, index: int, take: bool = False) -> tuple[int, Any] | None:
        """The checkpoint with the largest record index ``<= index`` (removed when ``take``)."""
        with self._lock:
            best = None
            for key in self._items:
                if key[0] == path and key[1] == fingerprint and key[2] <= index and (best is None or key[2] > best[2]):
                    best = key
            if best is None:
                return None
            state = self._items.pop(best) if take else self._items[best]
            if not take:
                self._items.move_to_end(best)
            return best[2], state

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _GzState:
    offset: int  # compressed bytes consumed from the file
    decomp: Any  # zlib decompressobj positioned at ``offset`` (a copy: never shared)
    tail: bytes  # compressed input fed but not yet decompressed (``unconsumed_tail``)
    pending: bytes  # decompressed bytes after the last full line


def sniff_shard(fs: Any, path: str) -> Compression:
    """The compression of the JSON-lines shard ``path``, from its first bytes."""
    with fs.open(path, "rb") as handle:
        return sniff_compression(handle.read(8))


def resumable(codec: Compression) -> bool:
    """True when a page of a ``codec`` shard resumes from a copied state (else from a handed-over reader)."""
    return codec in ("none", "gzip")


class LineSource:
    """Lines of a (compressed) text file with a resumable state after every line.

    ``codec`` is the shard's compression (:func:`sniff_shard`; sniffed here when None).
    """

    def __init__(self, fs: Any, path: str, codec: Compression | None, state: Any | None) -> None:
        self.fs, self.path = fs, path
        self.handle = fs.open(path, "rb")
        if codec is None:
            codec = sniff_compression(self.handle.read(8))
            self.handle.seek(0)
        self.codec: Compression = codec
        self.buffer = b""
        if codec == "none":
            self.offset = int(state or 0)  # byte offset of self.buffer's first byte
            self.handle.seek(self.offset)
        elif codec == "gzip":
            st: _GzState = state or _GzState(0, new_decompressor("gzip"), b"", b"")
            self.offset, self.decomp, self.tail = st.offset, st.decomp.copy(), st.tail
            self.buffer = st.pending
            self.handle.seek(self.offset)
        elif state is not None:  # zstd / bz2 / xz: ``state`` is a live reader handed over (not copyable)
            self.handle.close()
            self.handle, self.reader, self.buffer = state
        else:
            self.reader = open_stream(self.handle, codec)
        self.eof = False

    def _more(self) -> bool:
        """Append decompressed bytes to the buffer; False at the end of the file."""
        if self.codec == "none":
            chunk = self.handle.read(_READ)
            if not chunk:
                return False
            self.buffer += chunk
            return True
        if self.codec != "gzip":
            chunk = self.reader.read(_READ)
            if not chunk:
                return False
            self.buffer += chunk
            return True
        while True:  # gzip
            if not self.tail:
                if self.decomp.eof:
                    rest = self.decomp.unused_data
                    self.decomp = new_decompressor("gzip")  # next member of a multi-member file
                    self.tail = rest.lstrip(b"\x00")
                if not self.tail:
                    chunk = self.handle.read(_READ)
                    if not chunk:
                        return False
                    self.offset += len(chunk)
                    self.tail = chunk
            out = self.decomp.decompress(self.tail, _MAX_OUT)
            self.tail = self.decomp.unconsumed_tail
            if self.decomp.eof and self.decomp.unused_data:
                self.tail = self.decomp.unused_data + self.tail
                self.decomp = new_decompressor("gzip")
            if out:
                self.buffer += out
                return True

    def lines(self) -> Iterator[bytes]:
        """Non-empty lines; after each, :meth:`state` resumes right behind it. A line longer than
        :data:`MAX_LINE_BYTES` comes as an :class:`OversizedLine` (its bytes were dropped)."""
        start = 0
        skipped = 0  # bytes of an oversized line dropped so far (0: not inside one)
        while True:
            nl = self.buffer.find(b"\n", start)
            if nl >= 0:
                line = self.buffer[start:nl]
                start = nl + 1
                if skipped:
                    self._consumed = start
                    yield OversizedLine(skipped + len(line))
                    skipped = 0
                elif line.strip():
                    self._consumed = start
                    yield line
                continue
            if start:
                if self.codec == "none":
                    self.offset += start
                self.buffer = self.buffer[start:]
                start = 0
            self._consumed = 0
            if len(self.buffer) > MAX_LINE_BYTES:  # no end in sight: drop what we hold of it
                skipped += len(self.buffer)
                if self.codec == "none":
                    self.offset += len(self.buffer)
                self.buffer = b""
            if not self._more():
                if skipped or self.buffer.strip():
                    line, self.buffer = self.buffer, b""
                    self._consumed = 0
                    yield OversizedLine(skipped + len(line)) if skipped else line
                self.eof = True
                return

    def state(self) -> Any:
        """A resume point right after the last line yielded (None for zstd / bz2 / xz: use :meth:`handover`)."""
        rest = self.buffer[self._consumed :]
        if self.codec == "none":
            return self.offset + self._consumed
        if self.codec == "gzip":
            return _GzState(self.offset, self.decomp.copy(), self.tail, rest)
        return None

    def handover(self) -> Any:
        """The live zstd / bz2 / xz reader, positioned right after the last line yielded (this source is spent)."""
        state = (self.handle, self.reader, self.buffer[self._consumed :])
        self.handle = None
        return state

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


@dataclass
class Page:
    """Records ``[start, next_start)`` of a shard that matched (all, without a predicate).

    ``notes``: what the page leaves out and why (a parquet column or file over the read limit)."""

    records: list[tuple[int, dict[str, Any]]]
    start: int
    next_start: int
    at_end: bool
    scanned: int
    notes: list[str] = field(default_factory=list)


class ShardPager:
    """Pages of records of shards, with resume points remembered across requests."""

    def __init__(self, checkpoints: Checkpoints | None = None, max_read_bytes: int = MAX_READ_BYTES) -> None:
        self.checkpoints = checkpoints or Checkpoints()
        self.max_read_bytes = max_read_bytes
        self.layouts = LayoutCache()

    @staticmethod
    def fingerprint(fs: Any, path: str) -> str:
        """Size and modification time: a rewritten shard never resumes from stale offsets."""
        info = fs.info(path)
        return f"{info.get('size')}:{info.get('mtime') or info.get('updated') or info.get('LastModified') or ''}"

    def page(
        self,
        url: str,
        start: int,
        count: int,
        matches: Callable[[list[tuple[int, dict[str, Any]]]], list[bool]] | None = None,
        scan_limit: int = 20_000,
        batch: int = 500,
    ) -> Page:
        """Up to ``count`` records from record ``start`` on (those ``matches`` keeps, when given).

        ``matches`` gets batches of ``(index, record)`` (so it can join attributes per batch) and
        returns one bool per record; at most ``scan_limit`` records are read per call.
        """
        fs, path = fresh_filesystem(url)  # the fingerprint must see a rewritten shard
        kind = shard_format(path)
        if kind is None:
            raise ValueError(f"{url} is not a record shard ({', '.join(SHARD_SUFFIXES)})")
        if kind == "parquet":
            return self._parquet_page(fs, path, start, count, matches, scan_limit, batch)
        fp = self.fingerprint(fs, path)
        codec = sniff_shard(fs, path)
        found = self.checkpoints.nearest(path, fp, start, take=not resumable(codec))
        index, state = found if found else (0, None)
        source = LineSource(fs, path, codec, state)
        out: list[tuple[int, dict[str, Any]]] = []
        scanned = 0
        pending: list[tuple[int, dict[str, Any]]] = []
        at_end = True
        try:
            for line in source.lines():
                if index < start:
                    index += 1
                    continue
                pending.append((index, parse_line(line, index)))
                index += 1
                scanned += 1
                if len(pending) >= (batch if matches else count - len(out)):
                    out.extend(self._keep(pending, matches))
                    pending = []
                if len(out) >= count or scanned >= scan_limit:
                    at_end = False
                    break
            out.extend(self._keep(pending, matches))
            next_start = max(index, start)
            if len(out) > count:  # a filtered batch overshot: the next page starts after the last shown
                out = out[:count]
                next_start = out[-1][0] + 1
                scanned = next_start - start
                at_end = False  # matches past the page were read (and dropped): there is a next page
            elif not at_end:
                self._remember(path, fp, next_start, source)
        finally:
            source.close()
        return Page(records=out, start=start, next_start=next_start, at_end=at_end, scanned=scanned)

    @staticmethod
    def _keep(batch: list[tuple[int, dict[str, Any]]], matches: Any) -> list[tuple[int, dict[str, Any]]]:
        if not batch or matches is None:
            return batch
        return [item for item, keep in zip(batch, matches(batch), strict=True) if keep]

    def _remember(self, path: str, fp: str, index: int, source: LineSource) -> None:
        if resumable(source.codec):
            self.checkpoints.put(path, fp, index, source.state())
        else:
            self.checkpoints.put(path, fp, index, source.handover())

    def _parquet_page(self, fs, path, start, count, matches, scan_limit, batch) -> Page:
        import pyarrow as pa

        try:
            return self._parquet_rows(fs, path, start, count, matches, scan_limit, batch)
        finally:
            # Arrow's allocator keeps freed pages for reuse; a browser serves a page now and then:
            # give them back, so a burst of requests does not stay in the process's RSS.
            pa.default_memory_pool().release_unused()

    def _parquet_rows(self, fs, path, start, count, matches, scan_limit, batch) -> Page:
        out: list[tuple[int, dict[str, Any]]] = []
        pending: list[tuple[int, dict[str, Any]]] = []
        batch = min(batch, PARQUET_BATCH_ROWS)
        index = start
        with fs.open(path, "rb") as handle:
            key = (path, self.fingerprint(fs, path))
            try:
                rows = ParquetRows(handle, fs.size(path), self.max_read_bytes, self.layouts, key)
            except ParquetTooLarge as exc:
                return Page([], start, start, True, 0, notes=[f"not shown: {exc}"])
            for row_index, record in rows.rows(start, batch):
                pending.append((row_index, record))
                index = row_index + 1
                if len(pending) >= (batch if matches else count - len(out)) or index - start >= scan_limit:
                    out.extend(self._keep(pending, matches))
                    pending = []
                if len(out) >= count or index - start >= scan_limit:
                    if len(out) > count:
                        out = out[:count]
                        index = out[-1][0] + 1
                    return Page(out, start, index, index >= rows.num_rows, index - start, notes=rows.notes)
            out.extend(self._keep(pending, matches))
        return Page(out, start, index, True, index - start, notes=rows.notes)


class ParquetRows:
    """The rows of an open parquet file, read within a byte limit (see :mod:`.parquet_pages`): a row
    group's column whose pages are over the limit is left out and its cells say so (``notes``)."""

    def __init__(self, handle: Any, size: int, limit: int, layouts: LayoutCache, key: tuple[str, str]) -> None:
        import pyarrow.parquet as pq

        check_footer(handle, size, limit // FOOTER_SHARE, f"1/{FOOTER_SHARE} of {SETTING}")
        handle.seek(0)
        self.handle, self.limit, self.layouts, self.key = handle, limit, layouts, key
        # Buffered column reads: a page at a time, never a whole column chunk of the row group
        # (one row group may be the whole file).
        self.file = pq.ParquetFile(handle, buffer_size=PARQUET_BUFFER_BYTES, pre_buffer=False)
        self.metadata = self.file.metadata
        self.num_rows = self.metadata.num_rows
        self.notes: list[str] = []

    def _left_out(self, group: int) -> dict[str, str]:
        key = (*self.key, group, self.limit)
        found = self.layouts.get(key)
        if found is None:
            found = oversized_fields(self.handle, self.metadata, group, self.limit)
            self.layouts.put(key, found)
        for column, why in found.items():
            note = not_shown(column, group, why, self.limit)
            if note not in self.notes:
                self.notes.append(note)
        return found

    def rows(self, start: int, batch: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(index, row)`` from row ``start`` on, in batches of ``batch`` rows."""
        first = 0
        names = self.file.schema_arrow.names
        for group in range(self.metadata.num_row_groups):
            size = self.metadata.row_group(group).num_rows
            if first + size <= start:
                first += size
                continue
            left_out = self._left_out(group)
            columns = [name for name in names if name not in left_out]
            stand_in = {column: not_shown(column, group, why, self.limit) for column, why in left_out.items()}
            position = first
            for records in self._batches(group, columns, size, batch):
                n = len(records)
                if position + n <= start:
                    position += n
                    continue
                for offset, record in enumerate(records[max(0, start - position) :], start=max(start, position)):
                    record.update(stand_in)
                    yield offset, {name: record.get(name) for name in names}
                position += n
            first += size

    def _batches(self, group: int, columns: list[str], size: int, batch: int) -> Iterator[list[dict[str, Any]]]:
        if not columns:  # every column left out: the rows are there, their cells say why
            for at in range(0, size, batch):
                yield [{} for _ in range(min(batch, size - at))]
            return
        for arrow_batch in self.file.iter_batches(
            batch_size=batch, row_groups=[group], columns=columns, use_threads=False
        ):
            yield arrow_batch.to_pylist()
