"""Readers of raw input files: JSON lines (plain / gzip / zstd), parquet, WARC / WET, HF datasets.

The format of a file is **sniffed from its first bytes** (gzip ``1f 8b``, zstd ``28 b5 2f fd``,
bz2 ``BZh``, xz ``fd 37 7a 58 5a 00``, parquet ``PAR1``, ``WARC/`` after any decompression), never trusted from its name: a gzip file
named ``.jsonl`` or plain text named ``.jsonl.gz`` is read as what it is. The name is only a tie
breaker for uncompressed text. A file no reader accepts is quarantined whole, with its line count.

Every reader yields ``(position, record)``: ``position`` is the 1-based line (JSON lines), row
(parquet, HF datasets) or record number (WARC; the byte offset is in the record's metadata), and
``record`` is a dict with at least ``id``/``text`` candidates and ``metadata`` holding the
provenance the format has (WARC record id, URL, fetch date, HF split). Problems go to the
:class:`~marin_assets.core.shard_stage.Quarantine` and never stop the file: a truncated or
corrupt stream, or one followed by bytes that start no member, keeps everything before the
damage (decompression is :mod:`marin_assets.core.compression`'s ``StreamDecoder``, shared with
the WARC reader below this module), and the damage is quarantined with its byte offset.

Local files are opened with ``O_NOFOLLOW``: a symlink is never read (``landing.validate_drop``
rejects drops holding one; this closes the window between that check and the read).
"""

from __future__ import annotations

import codecs
import io
import json
import math
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from marin_assets.core.compression import (
    BZ2_MAGIC,
    GZIP_MAGIC,
    XZ_MAGIC,
    ZSTD_MAGIC,
    Codec,
    StreamDecoder,
    is_zstd_skippable,
    new_decompressor,
    skip_zstd_skippable,
)
from marin_assets.core.io import non_finite_text
from marin_assets.core.shard_stage import SAMPLE_CHARS, Quarantine
from marin_assets.execution.storage import filesystem
from marin_assets.transform.raw.warc_reader import read_warc

PARQUET_MAGIC = b"PAR1"
WARC_MAGIC = b"WARC/"
UTF8_BOM = b"\xef\xbb\xbf"
FORMATS = ("jsonl", "jsonl.gz", "jsonl.zst", "jsonl.bz2", "jsonl.xz", "parquet", "warc", "warc.gz", "warc.zst")
# Compression of the JSON-lines formats (None: plain).
JSONL_CODECS: dict[str, Codec | None] = {
    "jsonl": None,
    "jsonl.gz": "gzip",
    "jsonl.zst": "zstd",
    "jsonl.bz2": "bz2",
    "jsonl.xz": "xz",
}
_JSON_NAMES = (".jsonl", ".json", ".ndjson")
READ_BYTES = 1 << 20
_LINE_END = re.compile(rb"\r\n?|\n")
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def open_input(path: str) -> BinaryIO:
    """Open ``path`` for reading; a local path that is a symlink raises ``OSError`` (ELOOP)."""
    fs, p = filesystem(path)
    if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        return os.fdopen(os.open(p, os.O_RDONLY | os.O_NOFOLLOW), "rb")
    return fs.open(p, "rb")


def _decompress_head(codec: Codec, head: bytes) -> bytes:
    try:
        return new_decompressor(codec).decompress(head)[:64]
    except Exception:  # noqa: BLE001 - corrupt from the start: safe, the line reader quarantines it with its offset
        return b""


def sniff_format(head: bytes, name: str) -> str | None:
    """The format of a file from its first bytes (``FORMATS``), or None when unsupported.

    A head that starts with a zstd skippable frame is not sniffed (None): ``read_file`` passes the
    bytes after such frames (:func:`skip_zstd_skippable`) and reads the file as zstd."""
    if is_zstd_skippable(head):
        return None
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    for magic, codec, suffix in ((GZIP_MAGIC, "gzip", ".gz"), (ZSTD_MAGIC, "zstd", ".zst")):
        if head.startswith(magic):
            inner = _decompress_head(codec, head)
            return ("warc" if inner.startswith(WARC_MAGIC) else "jsonl") + suffix
    for magic, suffix in ((BZ2_MAGIC, ".bz2"), (XZ_MAGIC, ".xz")):
        if head.startswith(magic):  # JSON lines only (FastWARC reads no bz2 / xz)
            return "jsonl" + suffix
    if head.startswith(WARC_MAGIC):
        return "warc"
    stripped = head.removeprefix(UTF8_BOM).lstrip()
    if stripped.startswith(b"{") or not stripped:
        return "jsonl"
    base = name.lower()
    for suffix in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
        base = base.removesuffix(suffix)
    return "jsonl" if base.endswith(_JSON_NAMES) else None


def format_from_name(name: str) -> str | None:
    """The format a file's name claims (for the provenance's mismatch note only)."""
    lower = name.lower()
    for fmt in sorted(FORMATS, key=len, reverse=True):
        if lower.endswith("." + fmt) or (fmt.startswith("warc") and lower.endswith(fmt.replace("warc", "wet"))):
            return fmt
    return "jsonl.gz" if lower.endswith((".json.gz", ".ndjson.gz")) else None


class Utf16AsUtf8(io.RawIOBase):
    """A UTF-16 byte stream with a byte order mark, read as UTF-8 bytes (the BOM dropped).

    Decoded incrementally; a byte sequence that is no UTF-16 becomes U+FFFD (the JSON-lines reader
    then quarantines that line as it would any damaged one, the others kept).
    """

    def __init__(self, handle: BinaryIO) -> None:
        super().__init__()
        self._handle = handle
        bom = handle.read(2)
        self._decoder = codecs.getincrementaldecoder("utf-16-le" if bom == b"\xff\xfe" else "utf-16-be")("replace")
        self._pending = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self, size: int) -> None:
        while not self._eof and len(self._pending) < size:
            chunk = self._handle.read(READ_BYTES)
            self._eof = not chunk
            self._pending += self._decoder.decode(chunk, final=self._eof).encode("utf-8")

    def peek(self, size: int) -> bytes:
        self._fill(size)
        return self._pending[:size]

    def read(self, size: int = -1) -> bytes:
        self._fill(size if size >= 0 else 1 << 62)
        size = len(self._pending) if size < 0 else size
        out, self._pending = self._pending[:size], self._pending[size:]
        return out

    def close(self) -> None:
        self._handle.close()
        super().close()


# ------------------------------------------------------------------------------------------
# JSON lines


def iter_lines(
    handle: BinaryIO, codec: Codec | None, max_line: int, quarantine: Quarantine
) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, bytes) of a possibly compressed, possibly broken text stream.

    Decompresses incrementally (:class:`~marin_assets.core.compression.StreamDecoder`) so that a
    truncated or corrupt stream, or one followed by bytes that start no member, still yields
    every complete line before the damage. The damage is quarantined once
    (``truncated_<codec>``, ``corrupt_<codec>``, ``trailing_<codec>``) with its byte offset and
    the number of the line it falls in; a line cut short by it is that record's sample, never a
    line of its own. Lines over ``max_line`` bytes are skipped as they stream in (never buffered whole).
    """
    decoder = StreamDecoder(codec) if codec else None
    buf = bytearray()
    line_no = 0
    skipping = False  # inside an over-long line: drop bytes until the next newline
    # A raw CR is never inside a JSON line (JSON escapes control characters), so a lone CR ends a
    # line as LF and CRLF do (old Mac line ends must not join records). Lines are split at LF (fast;
    # a CRLF's CR is stripped with the line) until a lone CR shows -- a CR inside a line, or a chunk
    # without any LF -- then at LF, CRLF and lone CR for the rest of the stream.
    lone_cr = False

    def split(final: bool) -> Iterator[tuple[int, bytes]]:
        nonlocal buf, line_no, skipping, lone_cr
        start = 0
        if line_no == 0 and buf[:3] == UTF8_BOM:  # a UTF-8 byte order mark is no part of line 1
            start = 3
        if not lone_cr and b"\n" not in buf and b"\r" in buf[:-1]:
            lone_cr = True
        while True:
            if lone_cr:
                match = _LINE_END.search(buf, start)
                if match is None:
                    break
                if match.group() == b"\r" and match.end() == len(buf) and not final:
                    break  # a CR at the end of the buffer: its LF may come with the next chunk
                nl, after = match.start(), match.end()
            else:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                cr = buf.find(b"\r", start, nl)
                if 0 <= cr < nl - 1:  # a CR inside the line: lone CRs end lines from here on
                    lone_cr = True
                    continue
                after = nl + 1
            line = bytes(buf[start:nl])
            start = after
            line_no += 1
            if skipping:
                skipping = False
                continue
            yield line_no, line
        del buf[:start]
        if len(buf) > max_line and not skipping:
            line_no += 1
            quarantine.add(
                "line_too_long", f"line longer than {max_line} bytes", line=line_no, sample=bytes(buf[:SAMPLE_CHARS])
            )
            skipping = True
            buf.clear()
        elif skipping:
            buf.clear()
        if final and buf:
            line_no += 1
            if not skipping:
                yield line_no, bytes(buf)
            buf.clear()

    utf16: Any = None  # a compressed stream of UTF-16 text (a BOM first): transcoded to UTF-8
    seen_data = False
    while True:
        chunk = handle.read(READ_BYTES)
        if not chunk:
            break
        data = chunk if decoder is None else decoder.decode(chunk)
        if decoder is not None and not seen_data and data:
            seen_data = True
            if data[:2] in UTF16_BOMS:
                utf16 = codecs.getincrementaldecoder("utf-16-le" if data[:2] == b"\xff\xfe" else "utf-16-be")("replace")
                data = data[2:]
        if utf16 is not None:
            data = utf16.decode(data).encode("utf-8")
        buf += data
        yield from split(final=False)
        if decoder is not None and decoder.damage is not None:
            break
    damage = decoder.finish() if decoder is not None else None
    if utf16 is not None:
        buf += utf16.decode(b"", final=True).encode("utf-8")
    if damage is None or damage.kind == "trailing":  # the stream's own content is whole
        yield from split(final=True)
    if damage is not None:
        cut = bytes(buf) if damage.kind != "trailing" and not skipping else b""
        where = f"; line {line_no + 1} cut short by it" if cut else ""
        quarantine.add(
            f"{damage.kind}_{codec}",
            f"{damage.detail}; the {line_no} line(s) before kept{where}",
            line=line_no + 1,
            sample=cut or None,
            offset=damage.offset,
        )


_SKIP = object()


def finite_or_text(value: float) -> float | str:
    """A float as JSON can hold it: NaN and infinities (Python's JSON extension reads them; JSON has
    none) become ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``, so no output shard holds a bare token."""
    return value if math.isfinite(value) else non_finite_text(value)


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def parse_json_line(raw: bytes, line: int, quarantine: Quarantine) -> Any:
    """The JSON value of one line, or ``_SKIP`` (blank, or quarantined with the reason)."""
    raw = raw.rstrip(b"\r")
    if raw.startswith(UTF8_BOM):  # concatenated files: a byte order mark at the start of a middle line
        raw = raw[3:]
    if not raw.strip():
        return _SKIP
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        quarantine.add("invalid_utf8", f"invalid UTF-8 at byte {exc.start}", line=line, sample=raw)
        return _SKIP
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        quarantine.add("not_json", f"not JSON: {str(exc)[:120]}", line=line, sample=text)
        return _SKIP
    # Only a \uD800-\uDFFF escape can put a lone surrogate into valid UTF-8 JSON; such a string
    # cannot be written as UTF-8 again, so the record goes (alone) to quarantine.
    if "\\u" in text and _has_lone_surrogate(value):
        quarantine.add(
            "unencodable_text",
            f"{quarantine.file} line {line}: a string holds a lone surrogate (\\uD800-\\uDFFF escape) "
            "that cannot be encoded as UTF-8",
            line=line,
            doc_id=value.get("id") if isinstance(value, dict) and isinstance(value.get("id"), str) else None,
            sample=text,
        )
        return _SKIP
    return value


_JSON_TYPES = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


def jsonl_objects(handle: BinaryIO, codec: Codec | None, max_line: int, q: Quarantine) -> Iterator[tuple[int, dict]]:
    """(line, record) of an untrusted JSON-lines input stream; bad lines quarantined, and so is every
    line whose JSON value is no object (``null``, a number, a string, an array: ``not_an_object``).
    Shards the stages wrote themselves are read by the one JSONL reader, ``core.io.read_jsonl``."""
    for line, raw in iter_lines(handle, codec, max_line, q):
        value = parse_json_line(raw, line, q)
        if value is _SKIP:
            continue
        if not isinstance(value, dict):
            kind = _JSON_TYPES.get(type(value), type(value).__name__)
            q.add("not_an_object", f"JSON value is {kind}, not an object", line=line, sample=raw)
            continue
        yield line, value


# ------------------------------------------------------------------------------------------
# Parquet


def _rows_of_batches(batches: Iterator[Any], q: Quarantine, first_row: int = 1) -> Iterator[tuple[int, dict]]:
    """(1-based row, row dict) of Arrow record batches; a row whose strings are not valid UTF-8
    (Arrow does not check what a foreign writer stored) is quarantined alone as ``invalid_utf8``."""
    row = first_row - 1
    for batch in batches:
        try:
            rows = batch.to_pylist()
        except UnicodeDecodeError:  # find the bad row(s); the others of the batch are kept
            rows = []
            for i in range(batch.num_rows):
                try:
                    rows.append(batch.slice(i, 1).to_pylist()[0])
                except UnicodeDecodeError as exc:
                    rows.append(exc)
        for rec in rows:
            row += 1
            if isinstance(rec, UnicodeDecodeError):
                q.add(
                    "invalid_utf8", f"{q.file} row {row}: a string column is not valid UTF-8 ({rec.reason})", line=row
                )
                continue
            yield row, rec


def _is_binary(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
        or (hasattr(pa.types, "is_binary_view") and pa.types.is_binary_view(arrow_type))
    )


def _decode_binary(rec: dict, keys: list[str], row: int, q: Quarantine) -> bool:
    """Decode ``rec``'s binary ``keys`` as UTF-8 in place; False (quarantined) when one is invalid."""
    for key in keys:
        value = rec.get(key)
        if isinstance(value, (bytes, bytearray)):
            try:
                rec[key] = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                q.add(
                    "invalid_utf8",
                    f"{q.file} row {row}: binary column {key!r} is not valid UTF-8 at byte {exc.start}",
                    line=row,
                    sample=bytes(value[:SAMPLE_CHARS]),
                )
                return False
    return True


def rename_fields(rec: dict, text_key: str, id_key: str) -> dict:
    """``rec`` with ``text_key`` / ``id_key`` read as ``text`` / ``id`` (the other fields stay)."""
    for key, standard in ((text_key, "text"), (id_key, "id")):
        if key != standard and key in rec:
            rec[standard] = rec.pop(key)
    return rec


def read_parquet(
    handle: BinaryIO, q: Quarantine, id_prefix: str = "", text_key: str = "text", id_key: str = "id"
) -> Iterator[tuple[int, Any]]:
    """(1-based row, row dict) of a parquet file with a ``text_key`` column.

    Without an ``id_key`` column (e.g. a Hugging Face dataset's parquet export) a row's id is
    ``<id_prefix>/<row>``; every other column stays in the record (the raw stage keeps it as
    metadata: ``url``, ``date``, ...).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError, ValueError) as exc:
        q.add("bad_parquet", f"not a readable parquet file: {exc}")
        return
    names = pf.schema_arrow.names
    if text_key not in names:
        q.add(
            "parquet_schema",
            f"parquet schema has no text column {text_key!r} (has {names}); name it with RawConfig(text_key=...) "
            "or curation_steps(text_key=...)",
            count=pf.metadata.num_rows,
        )
        return
    has_id = id_key in names
    # A writer may store text as binary (bytes): decoded as UTF-8 row by row, a row that is not
    # valid UTF-8 quarantined alone.
    binary = [key for key in (text_key, id_key) if key in names and _is_binary(pf.schema_arrow.field(key).type)]
    # Row group by row group: damage inside one (a corrupt page, a bad column chunk) quarantines
    # that group's rows alone, with their range; the other groups are read.
    first = 1
    for group in range(pf.num_row_groups):
        rows_in_group = pf.metadata.row_group(group).num_rows
        row = first - 1
        try:
            for row, rec in _rows_of_batches(pf.iter_batches(batch_size=1000, row_groups=[group]), q, first):
                if binary and not _decode_binary(rec, binary, row, q):
                    continue
                rec = rename_fields(rec, text_key, id_key)
                if not has_id:
                    rec["id"] = f"{id_prefix}/{row}"
                yield row, rec
        except (pa.ArrowException, OSError, ValueError) as exc:
            lost = first + rows_in_group - 1 - row
            q.add(
                "bad_parquet",
                f"{q.file} row group {group} (rows {first}-{first + rows_in_group - 1}): read failed after row "
                f"{row}: {exc}; its {lost} row(s) left quarantined, the other row groups read",
                line=row + 1,
                count=max(1, lost),
            )
        first += rows_in_group


# ------------------------------------------------------------------------------------------
# Hugging Face dataset folders (``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``)

HF_MARKERS = ("dataset_dict.json", "state.json")


def hf_dataset_folders(names: list[str]) -> list[str]:
    """The outermost folders (relative to the drop) among ``names`` that are saved HF datasets."""
    folders = sorted(
        {n.rsplit("/", 1)[0] if "/" in n else "" for n in names if n.rsplit("/", 1)[-1] in HF_MARKERS},
        key=len,
    )
    out: list[str] = []
    for folder in folders:
        if not any(folder == o or folder.startswith(o + "/") or o == "" for o in out):
            out.append(folder)
    return out


def read_hf_dataset(
    path: str, q: Quarantine, id_prefix: str, text_key: str = "text", id_key: str = "id"
) -> Iterator[tuple[int, Any]]:
    """(1-based row within its split, record) of a saved HF dataset or dataset dict folder.

    Rows without an ``id_key`` column get ``<id_prefix>/<split>/<row>``; the split and row go to
    the metadata as provenance, every other column stays in the record.
    """
    import datasets
    import pyarrow as pa

    try:
        loaded = datasets.load_from_disk(path)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the folder's problem: quarantined with its reason
        q.add("bad_hf_dataset", f"datasets.load_from_disk failed: {type(exc).__name__}: {exc}"[:300])
        return
    splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
    for split, ds in splits:
        if text_key not in ds.column_names:
            q.add(
                "hf_schema",
                f"split {split!r} has no text column {text_key!r} (has {ds.column_names}); name it with "
                "RawConfig(text_key=...)",
                count=ds.num_rows,
            )
            continue
        batches = ds.with_format("arrow").iter(batch_size=1000)
        row = 0
        try:
            for row, rec in _rows_of_batches(batches, q):
                rec = rename_fields(rec, text_key, id_key)
                if rec.get("id") is None:
                    rec["id"] = f"{id_prefix}/{split or 'data'}/{row}"
                metadata = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
                rec["metadata"] = {**metadata, "hf_split": split, "hf_row": row}
                yield row, rec
        except (pa.ArrowException, OSError, ValueError) as exc:  # damage inside the split's arrow files
            q.add(
                "bad_hf_dataset",
                f"split {split!r}: read failed after row {row}: {type(exc).__name__}: {exc}"[:300]
                + "; the split's later rows quarantined, the other splits read",
                line=row + 1,
                count=max(1, ds.num_rows - row),
            )


# ------------------------------------------------------------------------------------------


def read_file(
    path: str,
    name: str,
    max_doc_bytes: int,
    q: Quarantine,
    *,
    id_prefix: str = "",
    text_key: str = "text",
    id_key: str = "id",
) -> tuple[str | None, Iterator[tuple[int, Any]]]:
    """(sniffed format, (position, record) iterator) of one landing file.

    ``text_key`` / ``id_key`` name the fields (JSON lines) or columns (parquet) holding the text
    and the id; a parquet file without an id column gets ``<id_prefix>/<row>``. An unsupported
    file is quarantined whole (``unsupported_format``, counted per line).
    """
    handle: BinaryIO = open_input(path)
    head, skippable = skip_zstd_skippable(handle, handle.read(4096))
    handle.seek(0)
    if head.startswith(UTF16_BOMS):  # UTF-16 text (a BOM says which byte order): read as UTF-8
        handle = Utf16AsUtf8(handle)
        head = handle.peek(4096)
    fmt = sniff_format(head, name)
    if skippable:  # leading skippable frames make it zstd whatever follows (the reader reports damage)
        fmt = "warc.zst" if fmt == "warc.zst" else "jsonl.zst"
    return fmt, _records(handle, fmt, max_doc_bytes, q, id_prefix, text_key, id_key)


def _records(
    handle: BinaryIO, fmt: str | None, max_doc_bytes: int, q: Quarantine, id_prefix: str, text_key: str, id_key: str
) -> Iterator[tuple[int, Any]]:
    readers: dict[str, Callable[[], Iterator[tuple[int, Any]]]] = {
        "parquet": lambda: read_parquet(handle, q, id_prefix, text_key, id_key),
        "warc": lambda: read_warc(handle, q, None, max_record),
        "warc.gz": lambda: read_warc(handle, q, "gzip", max_record),
        "warc.zst": lambda: read_warc(handle, q, "zstd", max_record),
    }
    max_line = max_doc_bytes * 2 + (1 << 20)  # JSON escaping can double a document
    max_record = max(max_line, 64 << 20)  # a WARC record buffered whole (HTTP headers, compressed bodies)
    try:
        if fmt is None:
            lines = sum(1 for _ in iter_lines(handle, None, max_line, Quarantine(q.stage, q.file)))
            q.add(
                "unsupported_format",
                f"content is none of {', '.join(FORMATS)} (sniffed, not from the name); {lines} line(s) not read",
                count=max(1, lines),
            )
            return
        if fmt in readers:
            yield from readers[fmt]()
        else:
            codec = JSONL_CODECS[fmt]
            renaming = (text_key, id_key) != ("text", "id")
            for line, value in jsonl_objects(handle, codec, max_line, q):
                yield line, rename_fields(value, text_key, id_key) if renaming else value
    finally:
        handle.close()
