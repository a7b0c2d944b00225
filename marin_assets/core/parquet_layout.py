"""What a parquet file says of its own layout, read before its data: footer and page sizes.

Arrow decodes a column a data page at a time, and a page whole: one 400 MiB page (a writer's huge
page size, or one 400 MiB cell -- a value never spans pages) costs hundreds of MiB to read a single
row, and a footer of many thousands of row groups is parsed whole before anything else. Readers that
must bound their memory (the raw stage's parquet reader, the data browser) ask here first:

* :func:`check_footer`: the footer's length, from the last 8 bytes;
* :func:`oversized_fields`: the columns of a row group with a page over a limit -- found from the
  column chunk sizes in the footer and, for a chunk over the limit, its page headers (Thrift compact
  structs, a few bytes each, walked without reading the pages).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_HEADER_READ = 64 << 10  # bytes read at a page header (a header holds its statistics: usually tiny)
_MAX_HEADER = 1 << 20  # a page header longer than this is no header we read
_MAX_PAGES_WALKED = 20_000  # a column chunk of more pages is not walked (reported as unsized)


class ParquetTooLarge(ValueError):
    """A parquet file a reader will not open within its limit (the message says why)."""


def check_footer(handle: Any, size: int, limit: int, why: str) -> None:
    """Raise :class:`ParquetTooLarge` when the footer (FileMetaData) of the open file is over
    ``limit`` bytes (``why``: where the limit comes from, for the message). Parsed, a footer of many
    row groups takes several times its bytes: callers keep ``limit`` a fraction of their memory."""
    if size < 12:
        raise ParquetTooLarge(f"{size} bytes: too short for a parquet file")
    handle.seek(size - 8)
    tail = handle.read(8)
    footer = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1":
        raise ParquetTooLarge("no parquet footer (the file does not end in PAR1)")
    if footer > limit:
        raise ParquetTooLarge(
            f"its footer (the metadata of its {'many ' if footer > 1 << 20 else ''}row groups) is {_mib(footer)}, over "
            f"the limit for a footer, {_mib(limit)} ({why}); not opened"
        )


class _Compact:
    """A reader of Thrift compact-protocol structs from a file, for page headers (skips everything
    but the sizes; a binary field, e.g. large statistics, is skipped by its length, never read)."""

    def __init__(self, handle: Any, at: int) -> None:
        self.handle, self.start = handle, at
        self.at = at  # file offset of the next byte
        self.window, self.buf = at, b""  # bytes read at file offset ``window``

    def _byte(self) -> int:
        if self.at - self.start > _MAX_HEADER:
            raise ValueError("page header too long")
        index = self.at - self.window
        if not 0 <= index < len(self.buf):
            self.handle.seek(self.at)
            self.window, self.buf = self.at, self.handle.read(_HEADER_READ)
            index = 0
            if not self.buf:
                raise ValueError("file ends inside a page header")
        self.at += 1
        return self.buf[index]

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self._byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ValueError("bad varint in a page header")

    def zigzag(self) -> int:
        value = self.varint()
        return (value >> 1) ^ -(value & 1)

    def skip_bytes(self, count: int) -> None:
        """Move past ``count`` bytes without reading them (a binary field: statistics, say)."""
        self.at += count

    def offset(self) -> int:
        """Bytes of the struct read so far (from its start)."""
        return self.at - self.start

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > 32:
            raise ValueError("page header nested too deep")
        if kind in (1, 2):  # bool (in a field header)
            return
        if kind == 3:
            self._byte()
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.skip_bytes(8)
        elif kind == 8:
            self.skip_bytes(self.varint())
        elif kind in (9, 10):
            head = self._byte()
            count = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(count):
                self.skip_element(head & 0x0F, depth + 1)
        elif kind == 11:
            count = self.varint()
            if count:
                types = self._byte()
                for _ in range(count):
                    self.skip_element(types >> 4, depth + 1)
                    self.skip_element(types & 0x0F, depth + 1)
        elif kind == 12:
            self.fields(depth + 1)
        else:
            raise ValueError(f"unknown Thrift type {kind} in a page header")

    def skip_element(self, kind: int, depth: int) -> None:
        if kind in (1, 2):  # a bool element is one byte
            self._byte()
        else:
            self.skip(kind, depth)

    def fields(self, depth: int = 0, wanted: tuple[int, ...] = ()) -> dict[int, int]:
        """Read one struct to its end; the integer values of the field ids in ``wanted``."""
        found: dict[int, int] = {}
        field_id = 0
        while True:
            head = self._byte()
            if head == 0:
                return found
            kind, delta = head & 0x0F, head >> 4
            field_id = field_id + delta if delta else self.zigzag()
            if field_id in wanted and kind in (4, 5, 6):
                found[field_id] = self.zigzag()
            else:
                self.skip(kind, depth)


def page_sizes(handle: Any, start: int, length: int) -> Iterator[tuple[int, int]]:
    """``(uncompressed, compressed)`` size of every page of the column chunk at ``start`` (its
    ``length`` compressed bytes), from the page headers alone. Raises ``ValueError`` when a header
    cannot be read."""
    pos, end, pages = start, start + length, 0
    while pos < end:
        pages += 1
        if pages > _MAX_PAGES_WALKED:
            raise ValueError(f"more than {_MAX_PAGES_WALKED} pages")
        reader = _Compact(handle, pos)
        sizes = reader.fields(wanted=(2, 3))
        if 2 not in sizes or 3 not in sizes or sizes[3] < 0 or sizes[2] < 0:
            raise ValueError(f"a page header at byte {pos} without its sizes")
        yield sizes[2], sizes[3]
        pos += reader.offset() + sizes[3]


def oversized_fields(handle: Any, metadata: Any, group: int, limit: int) -> dict[str, str]:
    """Top-level field -> why it is left out of row group ``group`` (a page over ``limit``)."""
    row_group = metadata.row_group(group)
    out: dict[str, str] = {}
    for j in range(row_group.num_columns):
        column = row_group.column(j)
        field = column.path_in_schema.split(".", 1)[0]
        if field in out or column.total_uncompressed_size <= limit:
            continue
        start = column.data_page_offset
        if column.has_dictionary_page and column.dictionary_page_offset:
            start = min(start, column.dictionary_page_offset)
        try:
            biggest = max((max(sizes) for sizes in page_sizes(handle, start, column.total_compressed_size)), default=0)
        except ValueError as exc:
            out[field] = (
                f"its pages could not be sized ({exc}), in a column chunk of {_mib(column.total_uncompressed_size)}"
            )
            continue
        if biggest > limit:
            out[field] = f"stored in a data page of {_mib(biggest)}"
    return out


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
