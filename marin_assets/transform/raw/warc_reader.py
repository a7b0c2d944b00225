"""WARC / WET records (FastWARC) as raw documents, with truncation and corruption reported.

Split from ``readers.py`` (the other formats); the raw stage reaches it through
``readers.read_file``, which sniffs ``WARC/`` after any decompression.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from marin_assets.core.shard_stage import Quarantine
from marin_assets.transform.raw.readers import GZIP_MAGIC, READ_BYTES, WARC_MAGIC, ZSTD_MAGIC, new_decompressor


def _decode_payload(body: bytes, charset: str | None) -> str:
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    encoding = charset or detect_encoding(body)
    return bytes_to_str(body, encoding)


_MAX_WARC_HEADER = 1 << 20


def _header_value(header: str, name: str) -> str:
    prefix = name.lower() + ":"
    for line in header.split("\r\n"):
        if line.lower().startswith(prefix):
            return line[len(prefix) :].strip()
    return ""


def warc_tail_problem(handle: BinaryIO, codec: str | None, offset: int) -> tuple[str | None, str | None]:
    """``(why the WARC stream from offset to the end of the file is incomplete, or None; the
    WARC-Record-ID of the record that lost content bytes, or None)``.

    ``offset`` is the start of the last record read. FastWARC stops quietly at a truncated file;
    this re-reads only that tail (that record and whatever unread records follow it),
    decompressing and walking the record headers as a stream: a truncated or corrupt compressed
    stream, or a record cut short, is a problem.
    """
    # The record's offset is where its gzip member / zstd frame starts when each record is
    # compressed alone (Common Crawl's layout); in a file compressed as one stream it is not, and
    # the whole file is walked instead.
    magic = {"gzip": GZIP_MAGIC, "zstd": ZSTD_MAGIC, None: WARC_MAGIC}[codec]
    handle.seek(offset)
    if handle.read(len(magic)) != magic:
        offset = 0
    handle.seek(offset)
    decomp = new_decompressor(codec) if codec else None
    buf = bytearray()
    remaining = 0  # bytes of the current record's block still to come (the closing CRLFs are skipped as blank)
    records = 0
    current_id = ""

    def where() -> str:
        return f"after {max(0, records - 1)} complete record(s) from byte {offset}"

    def lost() -> str | None:
        return current_id if remaining else None

    while True:
        chunk = handle.read(READ_BYTES)
        if not chunk:
            break
        if decomp is not None:
            try:
                data = decomp.decompress(chunk)
                while decomp.eof and decomp.unused_data:
                    rest = decomp.unused_data
                    decomp = new_decompressor(codec)
                    data += decomp.decompress(rest)
            except Exception as exc:  # zlib.error / zstandard.ZstdError
                return f"corrupt {codec} stream {where()}: {exc}", lost()
            buf += data
        else:
            buf += chunk
        while True:
            if remaining:
                used = min(remaining, len(buf))
                del buf[:used]
                remaining -= used
                if remaining:
                    break
            del buf[: len(buf) - len(buf.lstrip(b"\r\n"))]
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_WARC_HEADER:
                    return f"no WARC record header {where()}", None
                break
            header = bytes(buf[:end]).decode("latin-1")
            length = _header_value(header, "Content-Length")
            if not header.startswith("WARC/") or not length.isdigit():
                return f"no WARC record header with a Content-Length {where()}", None
            del buf[: end + 4]
            remaining = int(length)
            records += 1
            current_id = _header_value(header, "WARC-Record-ID")
    if remaining:
        return f"the file ends inside a WARC record ({remaining} byte(s) missing) {where()}", lost()
    if buf.strip(b"\r\n"):
        records += 1
        return f"the file ends inside a WARC record header {where()}", None
    if decomp is not None and not decomp.eof:
        return f"{codec} stream ends early {where()}", None
    return None, None


def read_warc(handle: BinaryIO, q: Quarantine, codec: str | None = None) -> Iterator[tuple[int, Any]]:
    """(1-based record number, record) of the HTML responses (WARC) or text conversions (WET).

    Other records (requests, metadata, warcinfo, non-HTML responses) are counted by the caller as
    ``records_in`` but produce nothing. The id is the WARC-Record-ID; metadata holds the URL, the
    fetch date, the record id and its byte offset in the (compressed) file. A truncated or corrupt
    file keeps every record before the damage, and the damage is quarantined (``corrupt_warc``).
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    wanted = WarcRecordType.response | WarcRecordType.conversion | WarcRecordType.resource
    number = 0
    last_offset = 0
    held: tuple[int, Any] | None = None  # the last record, yielded once the file is known to go on
    try:
        for record in ArchiveIterator(handle, record_types=wanted, parse_http=True, auto_decode="all"):
            if held is not None:
                yield held
            number += 1
            last_offset = record.stream_pos
            held = number, _warc_document(record)
    except OSError as exc:
        if held is not None:
            yield held
        q.add("corrupt_warc", f"WARC stream unreadable after record {number}: {exc}; records before kept")
        return
    problem, cut_id = warc_tail_problem(handle, codec, last_offset)
    if held is not None:
        if cut_id and held[1] is not None and held[1]["id"] == cut_id:
            q.add(
                "corrupt_warc",
                f"{q.file} record {number}: cut short by the end of the file; quarantined, records before kept",
                line=number,
                doc_id=held[1]["id"],
            )
            problem = None
        else:
            yield held
    if problem:
        q.add("corrupt_warc", f"{q.file}: {problem}; {number} record(s) before it kept")


def _warc_document(record: Any) -> dict[str, Any] | None:
    """The document of a WARC response / WET conversion record, or None when it is not a page."""
    from fastwarc.warc import WarcRecordType

    headers = record.headers
    record_id = record.record_id or ""
    url = headers.get("WARC-Target-URI") or ""
    date = headers.get("WARC-Date") or ""
    if record.record_type == WarcRecordType.conversion:
        content_type, body = "text/plain", record.reader.read()
        text = _decode_payload(body, "utf-8")
    else:
        content_type = (record.http_content_type or headers.get("Content-Type") or "").lower()
        if record.is_http and record.http_headers is not None and record.http_headers.status_code != 200:
            return None  # not a page (redirect, error): counted, not quarantined
        if "html" not in content_type and content_type != "text/plain":
            return None
        body = record.reader.read()
        text = _decode_payload(body, record.http_charset)
    metadata = {
        "url": url,
        "warc_record_id": record_id,
        "warc_date": date,
        "warc_offset": record.stream_pos,
        "content_type": "text/plain" if content_type.startswith("text/plain") else "text/html",
    }
    return {"id": record_id, "text": text, "created": date, "metadata": metadata}
