"""WARC / WET records as raw documents: record boundaries checked, damage quarantined per record.

Split from ``readers.py`` (the other formats); the raw stage reaches it through
``readers.read_file``, which sniffs ``WARC/`` after any decompression.

A record's ``Content-Length`` is not trusted alone. The file is decompressed as a stream (gzip
member by member, zstd frame by frame, or plain) and cut into records by our own boundary scan:
a record ends where its ``Content-Length`` says **only if** the block is followed by its
separator (``CRLF CRLF``; CR / LF bytes in any number are tolerated) and then the end of the file
or the next ``WARC/1.x`` header -- or by the exact ``CRLF CRLF`` with no header line inside the
block (the record is whole; what follows is garbage, skipped to the next header and reported).
Otherwise the length lies (a 4x length would swallow the next records, a half length would cut
the payload): the damaged record is quarantined alone (``corrupt_warc``), the reader
resynchronises on the next ``WARC/1.x`` header line after the damaged record's header, and every
later good record is kept. A payload that holds a ``WARC/1.`` line is read whole when its length
is right (the boundary after it checks out). A record whose header lines end in a bare LF (not WARC)
is quarantined alone with its id and byte offset. Each good record is then parsed by FastWARC (HTTP
headers, charset) from its own bytes; a payload its HTTP headers lie about (a ``Content-Encoding`` or
``Transfer-Encoding`` the body does not have, an unknown one) or without an HTTP status line is
quarantined alone (``bad_http_payload``), never a reason to fail the file.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from marin_assets.core.compression import Codec, Damage, StreamDecoder
from marin_assets.core.shard_stage import Quarantine

# WARC-Type values that can hold a page (others -- warcinfo, request, metadata, revisit -- are
# neither counted nor read, as FastWARC's record_types filter did).
_PAGE_TYPES = ("response", "conversion", "resource")
_MAX_WARC_HEADER = 1 << 20
# Compressed bytes read at a time. Small, because each gzip member (one per record in Common
# Crawl's layout) restarts the decompressor on a copy of the rest of the chunk.
_READ = 64 << 10
# A line that starts a WARC record header (``WARC/1.0`` or ``WARC/1.1``), preceded by a newline.
_HEADER_LINE = re.compile(rb"\nWARC/1\.\d\r?\n")
SAMPLE_BYTES = 200


def _decode_payload(body: bytes, charset: str | None) -> str:
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    encoding = charset or detect_encoding(body)
    return bytes_to_str(body, encoding)


def _header_value(header: str, name: str) -> str:
    prefix = name.lower() + ":"
    for line in header.split("\r\n"):
        if line.lower().startswith(prefix):
            return line[len(prefix) :].strip()
    return ""


class _Stream:
    """The decompressed bytes of a WARC file, read on demand into ``buf``.

    ``base`` is the decompressed offset of ``buf[0]``; the decoder's ``members`` map the
    decompressed start of each gzip member / zstd frame to its compressed offset (Common Crawl's
    record offset). ``problem`` says why the stream stopped early (corrupt or truncated
    compression, bytes after its end), if it did, and ``problem_offset`` where in the file.
    """

    def __init__(self, handle: BinaryIO, codec: Codec | None) -> None:
        self.handle = handle
        self.codec = codec
        self.decoder = StreamDecoder(codec, track_members=True) if codec else None
        self.members = self.decoder.members if self.decoder is not None else []
        self.buf = bytearray()
        self.base = 0
        self.eof = False
        self._pieces: Iterator[bytes] | None = None  # the decompressed pieces of the last chunk read
        self.problem: str | None = None
        self.problem_offset: int | None = None

    def fill(self) -> bool:
        """Read one more piece into ``buf`` (at most a chunk, or one bounded decompressed piece:
        :data:`~marin_assets.core.compression.MAX_PIECE`); False at the end of the (readable) data."""
        while True:
            if self._pieces is not None:
                for data in self._pieces:
                    if data:
                        self._take(data)
                        return True
                self._pieces = None
                if self.decoder is not None and self.decoder.damage is not None:  # nothing after it is readable
                    self.eof = True
                    self._damaged(self.decoder.damage)
            if self.eof:
                return False
            chunk = self.handle.read(_READ)
            if not chunk:
                self.eof = True
                if self.decoder is not None:
                    self._damaged(self.decoder.finish())
                return False
            if self.decoder is None:
                self._take(chunk)
                return True
            self._pieces = self.decoder.decode_pieces(chunk)

    def _damaged(self, damage: Damage | None) -> None:
        if damage is not None:
            self.problem = damage.detail
            self.problem_offset = damage.offset

    def _take(self, data: bytes) -> None:
        self.buf += data

    def need(self, size: int) -> bool:
        """Fill until ``buf`` holds ``size`` bytes; False when the data ends first."""
        while len(self.buf) < size:
            if not self.fill():
                return False
        return True

    def drop(self, size: int) -> None:
        del self.buf[:size]
        self.base += size
        while len(self.members) > 1 and self.members[1][0] <= self.base:
            self.members.pop(0)

    def offset(self, pos: int) -> int:
        """The file offset of ``buf[pos]``: its gzip member / zstd frame's, or its own when plain."""
        if self.codec is None:
            return self.base + pos
        absolute = self.base + pos
        best = self.members[0][1]
        for dec, comp in self.members:
            if dec > absolute:
                break
            best = comp
        return best


@dataclass
class _Header:
    text: str
    end: int  # index in buf just past the header's blank line
    length: int
    record_type: str
    record_id: str
    lf_only: bool = False  # the header's lines end in LF alone (not WARC: the record is quarantined)


_LF_HEADER_START = re.compile(rb"WARC/1\.\d\n")


def _parse_lf_header(stream: _Stream, start: int) -> _Header | None | str:
    """A header whose lines end in a bare LF (a writer that is not WARC's): parsed only far enough
    to quarantine its record with id, type and length."""
    while True:
        end = stream.buf.find(b"\n\n", start)
        if end >= 0:
            break
        if len(stream.buf) - start > _MAX_WARC_HEADER:
            return "no WARC record header"
        if not stream.fill():
            return None
    text = bytes(stream.buf[start:end]).decode("latin-1").replace("\n", "\r\n")
    length = _header_value(text, "Content-Length")
    return _Header(
        text,
        end + 2,
        int(length) if length.isdigit() else 0,
        _header_value(text, "WARC-Type").lower(),
        _header_value(text, "WARC-Record-ID"),
        lf_only=True,
    )


def _parse_header(stream: _Stream, start: int) -> _Header | None | str:
    """The WARC header at ``buf[start]``, None when the data ends inside it, or why it is no header."""
    stream.need(start + 9)
    if _LF_HEADER_START.match(stream.buf, start):
        return _parse_lf_header(stream, start)
    while True:
        end = stream.buf.find(b"\r\n\r\n", start)
        if end >= 0:
            break
        if len(stream.buf) - start > _MAX_WARC_HEADER:
            return "no WARC record header"
        if not stream.fill():
            return None
    text = bytes(stream.buf[start:end]).decode("latin-1")
    length = _header_value(text, "Content-Length")
    if not re.match(r"WARC/1\.\d\r\n", text + "\r\n") or not length.isdigit():
        return "no WARC record header with a Content-Length"
    record_type = _header_value(text, "WARC-Type").lower()
    return _Header(text, end + 4, int(length), record_type, _header_value(text, "WARC-Record-ID"))


def _boundary(stream: _Stream, end: int, limit: int) -> int | bool | None:
    """Where the next record starts when the record block ending at ``buf[end]`` is followed by
    its separator (CR / LF bytes: ``CRLF CRLF`` by the standard, a writer's variant tolerated) and
    then the end of the data or a ``WARC/1.`` header; False when something else follows (the
    ``Content-Length`` lies, or the separator runs on past ``limit`` bytes); None when the data ends
    before ``end``."""
    if not stream.need(end):
        return None
    pos = end
    while True:
        while pos < len(stream.buf) and stream.buf[pos] in b"\r\n":
            pos += 1
        if pos < len(stream.buf):
            break
        if pos > limit:
            return False  # a separator of megabytes: no record boundary (memory stays bounded)
        if not stream.fill():
            return pos  # the data ends after the separator
    stream.need(pos + 7)
    return pos if bytes(stream.buf[pos : pos + 7]) == b"WARC/1." else False


def _next_header(stream: _Stream, start: int, limit: int) -> int | None:
    """Index of the next line starting a WARC header at or after ``start`` (reading on up to
    ``limit`` buffered bytes), or None."""
    pos = max(start - 1, 0)
    while True:
        match = _HEADER_LINE.search(stream.buf, pos)
        if match:
            return match.start() + 1
        pos = max(len(stream.buf) - 16, pos)
        if len(stream.buf) >= limit or not stream.fill():
            return None


def read_warc(
    handle: BinaryIO, q: Quarantine, codec: str | None = None, max_record_bytes: int = 64 << 20, id_prefix: str = ""
) -> Iterator[tuple[int, Any]]:
    """(1-based record number, record) of the HTML responses (WARC) or text conversions (WET).

    Records of other WARC types (request, metadata, warcinfo) are not counted; a response that is
    not a page (non-200, non-HTML) yields None, which the caller counts as skipped. The id is the
    WARC-Record-ID; a record without one gets ``<id_prefix>@<byte offset>`` (compressed:
    ``@<offset of its gzip member / zstd frame>:<offset in the decompressed stream>``), so it is
    kept, never lost for a missing header. Metadata holds the URL, the fetch date, the record id
    and its byte offset in the file (the offset of its gzip member / zstd frame when compressed).
    Damage is quarantined as ``corrupt_warc`` and never costs a later good record: a record whose
    ``Content-Length`` does not end on a record boundary is quarantined alone and the reader
    resynchronises on the next ``WARC/1.`` header; a truncated or corrupt compressed stream keeps
    every record before the damage. A page record over ``max_record_bytes`` is quarantined as
    ``too_large`` without being buffered (the raw stage's document limit would refuse it anyway).
    """
    stream = _Stream(handle, codec)
    reader = _RecordReader(stream, q, max_record_bytes, id_prefix)
    while _skip_blank_lines(stream):
        header = _parse_header(stream, 0)
        if not isinstance(header, _Header):
            if not reader.bad_header(header):
                return
            continue
        is_page = header.record_type in _PAGE_TYPES
        if is_page:
            reader.number += 1
        if header.lf_only:
            if not reader.lf_only(header, is_page):
                return
            continue
        if header.end + header.length > max_record_bytes:
            yield from _oversize(stream, q, header, reader.number, is_page, max_record_bytes)
            continue
        going_on, document = reader.whole(header, is_page)
        if document is not _QUARANTINED:
            yield reader.number, document
        if not going_on:
            return
    if stream.problem:
        _stream_problem(stream, q, reader.number)


def _skip_blank_lines(stream: _Stream) -> bool:
    """Drop the blank lines before the next record (allowed between records); False at the end."""
    while True:
        skip = 0
        while skip < len(stream.buf) and stream.buf[skip] in b"\r\n":  # no copy of the buffer
            skip += 1
        stream.drop(skip)
        if stream.buf or not stream.fill():
            return bool(stream.buf)


class _RecordReader:
    """What :func:`read_warc` does with each record header it finds (one method per kind)."""

    def __init__(self, stream: _Stream, q: Quarantine, max_record_bytes: int, id_prefix: str) -> None:
        self.stream, self.q, self.max_record_bytes, self.id_prefix = stream, q, max_record_bytes, id_prefix
        self.number = 0  # page records seen so far

    def bad_header(self, header: None | str) -> bool:
        """No header where one must start: quarantined; True when reading goes on at the next one."""
        stream, q = self.stream, self.q
        why = "the file ends inside a WARC record header" if header is None else header
        nxt = None if header is None else _next_header(stream, 1, self.max_record_bytes)
        why = f"{why} ({stream.problem})" if stream.problem and nxt is None else why
        going_on = "reading on at the next WARC header" if nxt is not None else "records before kept"
        offset = stream.problem_offset if stream.problem and nxt is None else None
        q.add("corrupt_warc", f"{q.file}: {why} after record {self.number}; {going_on}", offset=offset)
        if nxt is None:
            return False
        stream.drop(nxt)
        return True

    def lf_only(self, header: _Header, is_page: bool) -> bool:
        """A record whose header lines end in a bare LF (not WARC): quarantined alone; True when
        reading goes on at the next header."""
        stream, q, number = self.stream, self.q, self.number
        q.add(
            "corrupt_warc",
            f"{q.file} record {number if is_page else '-'} ({header.record_type or 'no WARC-Type'}) at byte "
            f"{stream.offset(0)}: its header lines end in LF, not CRLF (not WARC); quarantined, "
            "reading on at the next WARC header",
            line=number if is_page else None,
            doc_id=header.record_id or None,
            offset=stream.offset(0),
        )
        nxt = _next_header(stream, header.end, self.max_record_bytes + header.end)
        if nxt is None:
            if stream.problem:
                _stream_problem(stream, q, number)
            return False
        stream.drop(nxt)
        return True

    def whole(self, header: _Header, is_page: bool) -> tuple[bool, Any]:
        """``(reading goes on, the record's document or _QUARANTINED)`` of a record that fits the limit."""
        stream = self.stream
        end = header.end + header.length
        ok = _boundary(stream, end, self.max_record_bytes)
        # The standard separator right where the length says, then no header: the record is whole
        # and garbage follows it (reported by the next round) -- unless the block holds a header
        # line, i.e. the length swallowed a later record.
        if (
            ok is False
            and bytes(stream.buf[end : end + 4]) == b"\r\n\r\n"
            and not _HEADER_LINE.search(stream.buf, max(header.end - 1, 0), end)
        ):
            ok = end + 4
        if ok is not None and ok is not False:
            document: Any = _QUARANTINED
            if is_page:
                data = bytes(stream.buf[:end]) + b"\r\n\r\n"
                document = _parse_record(data, self._position(), self.q, self.number, header.record_id)
            stream.drop(ok)
            return True, document
        return self._lying_length(header, is_page, ok), _QUARANTINED

    def _position(self) -> _Position:
        stream = self.stream
        offset = stream.offset(0)
        at = f"{offset}" if stream.codec is None else f"{offset}:{stream.base}"
        return _Position(offset, f"{self.id_prefix or self.q.file}@{at}", self.max_record_bytes)

    def _lying_length(self, header: _Header, is_page: bool, ok: int | bool | None) -> bool:
        """The Content-Length does not end this record: quarantined, resynchronised on the next
        header line; True when one was found."""
        stream, q, number = self.stream, self.q, self.number
        nxt = _next_header(stream, header.end, self.max_record_bytes + header.end)
        cut = ok is None and nxt is None
        why = (
            (f"cut short ({stream.problem})" if stream.problem else "cut short by the end of the file")
            if cut
            else f"its Content-Length ({header.length}) does not end on a record boundary"
        )
        q.add(
            "corrupt_warc",
            f"{q.file} record {number}: {why}; quarantined, "
            + ("records before kept" if nxt is None else "reading on at the next WARC header"),
            line=number if is_page else None,
            doc_id=header.record_id or None,
            offset=stream.problem_offset if cut else None,
        )
        if nxt is None:
            if stream.problem and not cut:
                _stream_problem(stream, q, number)
            return False
        stream.drop(nxt)
        return True


def _stream_problem(stream: _Stream, q: Quarantine, number: int) -> None:
    """Quarantine the compression damage that ended the stream after record ``number``."""
    q.add(
        "corrupt_warc",
        f"{q.file}: {stream.problem}, after record {number}; records before kept",
        offset=stream.problem_offset,
    )


def _oversize(
    stream: _Stream, q: Quarantine, header: _Header, number: int, is_page: bool, limit: int
) -> Iterator[tuple[int, Any]]:
    """Skip a record whose block exceeds ``limit`` without buffering it (its claimed length is
    checked like any other: a wrong one resynchronises on the next header)."""
    nxt = _next_header(stream, header.end, limit)
    if nxt is not None:  # a header inside the claimed block: the length lies
        q.add(
            "corrupt_warc",
            f"{q.file} record {number}: its Content-Length ({header.length}) does not end on a record boundary; "
            "quarantined, reading on at the next WARC header",
            line=number if is_page else None,
            doc_id=header.record_id or None,
        )
        stream.drop(nxt)
        return
    remaining = header.end + header.length
    while remaining > len(stream.buf):
        remaining -= len(stream.buf)
        stream.drop(len(stream.buf))
        if not stream.fill():
            q.add(
                "corrupt_warc",
                f"{q.file} record {number}: cut short by the end of the file; quarantined, records before kept",
                line=number if is_page else None,
                doc_id=header.record_id or None,
            )
            return
    stream.drop(remaining)
    if is_page:
        q.add(
            "too_large",
            f"{q.file} record {number}: WARC record of {header.length} bytes > {limit}; not read",
            line=number,
            doc_id=header.record_id or None,
        )
    yield from ()


_QUARANTINED = object()
_ENCODING_HEADER = re.compile(rb"(?im)^(content-encoding|transfer-encoding):([^\r\n]*)")


class _BadPayload(Exception):
    """A record whose HTTP payload cannot be read as it declares itself (quarantined alone)."""


class _PayloadTooLarge(Exception):
    """A record whose decoded payload is over the reader's limit (quarantined alone, never read whole)."""


def _read_body(record: Any, position: _Position) -> bytes:
    """The decoded payload of ``record``, at most ``position.max_body`` bytes (FastWARC decodes a
    ``Content-Encoding`` as it is read: reading a bounded amount bounds a compressed bomb too)."""
    body = record.reader.read(position.max_body + 1)
    if len(body) > position.max_body:
        raise _PayloadTooLarge(f"its decoded payload is over {position.max_body} bytes; not read further")
    return body


@dataclass(frozen=True)
class _Position:
    """Where a record starts: its byte offset (of its gzip member / zstd frame when compressed) and
    the id it gets when it has no ``WARC-Record-ID``."""

    offset: int
    synthetic_id: str
    max_body: int = 64 << 20  # the most decoded payload bytes read (a gzip-encoded body can be a bomb)


def _parse_record(data: bytes, position: _Position, q: Quarantine, number: int, record_id: str) -> Any:
    """The document of one whole WARC record's bytes (FastWARC parses HTTP and charset); None
    when it is no page, ``_QUARANTINED`` when it was quarantined.

    A payload its HTTP headers lie about -- ``Content-Encoding`` gzip / deflate / br over a plain
    body, an unknown ``Content-Encoding``, ``Transfer-Encoding: chunked`` over an unchunked body or
    with a bad hex size -- or a response without an HTTP status line is quarantined alone
    (``bad_http_payload``, with the record's number, id and byte offset), never read as something
    it is not; the next record is read as usual.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    wanted = WarcRecordType.response | WarcRecordType.conversion | WarcRecordType.resource
    offset = position.offset
    try:
        for record in ArchiveIterator(io.BytesIO(data), record_types=wanted, parse_http=True, auto_decode="all"):
            return _warc_document(record, position)
    except _PayloadTooLarge as exc:
        q.add(
            "too_large",
            f"{q.file} record {number} at byte {offset}: {exc}",
            line=number,
            doc_id=record_id or None,
            offset=offset,
        )
        return _QUARANTINED
    except (OSError, _BadPayload) as exc:  # FastWARC raises OSError for an undecodable payload
        declared = "; ".join(
            f"{m.group(1).decode('latin-1')}: {m.group(2).decode('latin-1').strip()}"
            for m in _ENCODING_HEADER.finditer(data, 0, 64 << 10)
        )
        q.add(
            "bad_http_payload",
            f"{q.file} record {number} at byte {offset}: {exc}"
            + (f" (the HTTP headers declare {declared})" if declared else "")
            + "; quarantined",
            line=number,
            doc_id=record_id or None,
            offset=offset,
            sample=data[:SAMPLE_BYTES],
        )
    return _QUARANTINED


def _warc_document(record: Any, position: _Position) -> dict[str, Any] | None:
    """The document of a WARC response / WET conversion record, or None when it is not a page.

    A record without a ``WARC-Record-ID`` gets the position's synthetic id (``metadata.synthetic_id``
    says so): a good page is never lost for a missing header."""
    from fastwarc.warc import WarcRecordType

    headers = record.headers
    record_id = record.record_id or ""
    offset = position.offset
    url = headers.get("WARC-Target-URI") or ""
    date = headers.get("WARC-Date") or ""
    if record.record_type == WarcRecordType.conversion:
        content_type, body = "text/plain", _read_body(record, position)
        text = _decode_payload(body, "utf-8")
    else:
        content_type = (record.http_content_type or headers.get("Content-Type") or "").lower()
        if record.is_http and record.http_headers is not None:
            status_line = record.http_headers.status_line or ""
            if record.record_type == WarcRecordType.response and not status_line.startswith("HTTP/"):
                raise _BadPayload(f"the HTTP payload has no status line (starts {status_line[:60]!r})")
            if record.http_headers.status_code != 200:
                return None  # not a page (redirect, error): counted, not quarantined
        if "html" not in content_type and content_type != "text/plain":
            return None
        body = _read_body(record, position)
        text = _decode_payload(body, record.http_charset)
    metadata = {
        "url": url,
        "warc_record_id": record_id,
        "warc_date": date,
        "warc_offset": offset,
        "content_type": "text/plain" if content_type.startswith("text/plain") else "text/html",
    }
    if not record_id:
        metadata["synthetic_id"] = True
    return {"id": record_id or position.synthetic_id, "text": text, "created": date, "metadata": metadata}
