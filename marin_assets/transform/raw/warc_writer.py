"""Write WARC files (gzip, one member per record, as Common Crawl does) with FastWARC's writer.

Used by the sample data (a WARC drop next to the jsonl drops), the tests and the benchmarks, so
the raw stage's WARC reader is exercised on files written by a real WARC writer.
"""

from __future__ import annotations

import io
import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

from fastwarc.stream_io import GzipWriter
from fastwarc.warc import WarcRecord, WarcRecordType

# Deterministic record ids: the same page always gets the same WARC-Record-ID.
_NAMESPACE = uuid.UUID("6f1f3c2e-8a51-4d6f-9a43-0c1d2b7e5a10")


def warc_record_id(key: str) -> str:
    """``<urn:uuid:...>`` derived from ``key`` (stable across runs)."""
    return f"<urn:uuid:{uuid.uuid5(_NAMESPACE, key)}>"


@dataclass(frozen=True)
class WarcPage:
    """One fetched page: an HTTP response record (or a WET text conversion when ``plain_text``)."""

    key: str
    url: str
    date: str
    body: str
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    plain_text: bool = False


def _record(page: WarcPage) -> WarcRecord:
    record = WarcRecord()
    record_type = WarcRecordType.conversion if page.plain_text else WarcRecordType.response
    record.init_headers(record_type=record_type, record_urn=warc_record_id(page.key)[5:-1].encode())
    record.headers["WARC-Target-URI"] = page.url
    record.headers["WARC-Date"] = page.date
    body = page.body.encode("utf-8")
    if page.plain_text:
        record.headers["Content-Type"] = "text/plain"
        record.set_bytes_content(body)
    else:
        record.headers["Content-Type"] = "application/http; msgtype=response"
        reason = "OK" if page.status == 200 else "Moved"
        head = f"HTTP/1.1 {page.status} {reason}\r\nContent-Type: {page.content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        record.set_bytes_content(head.encode("ascii") + body)
    return record


def _warcinfo(filename: str) -> WarcRecord:
    record = WarcRecord()
    record.init_headers(record_type=WarcRecordType.warcinfo, record_urn=warc_record_id(filename)[5:-1].encode())
    record.headers["WARC-Filename"] = filename
    record.headers["Content-Type"] = "application/warc-fields"
    record.set_bytes_content(b"software: marin-dagster sample data\r\nformat: WARC File Format 1.1\r\n")
    return record


def write_warc_gz(stream: BinaryIO, pages: Iterable[WarcPage], filename: str = "sample.warc.gz") -> int:
    """Stream a ``.warc.gz`` into ``stream`` (warcinfo first, then one gzip member per record).

    Returns the number of records written (warcinfo included); memory stays one record.
    """
    count = 0
    for record in itertools.chain([_warcinfo(filename)], (_record(p) for p in pages)):
        member = io.BytesIO()
        writer = GzipWriter(member)
        record.write(writer, checksum_data=True)
        writer.finish()
        stream.write(member.getvalue())
        count += 1
    return count


def encode_warc_gz(pages: Iterable[WarcPage], filename: str = "sample.warc.gz") -> bytes:
    """The bytes of :func:`write_warc_gz` for ``pages``."""
    out = io.BytesIO()
    write_warc_gz(out, pages, filename)
    return out.getvalue()
