"""The one compression layer: every reader and writer of the project compresses and decompresses here.

Codecs: gzip (ISA-L's ``isal`` when installed, ~3.5x zlib's speed, same format), zstd
(``zstandard``), bz2 and xz (standard library). Users:

* ``core/io.py`` (the stages' own shards): :func:`compression_for` / :class:`Compressor` to write,
  :func:`open_decompressed` to stream a shard back (fast, strict: our own files are whole);
* ``transform/raw/readers.py`` and ``warc_reader.py`` (untrusted landing files): :class:`StreamDecoder`,
  which never loses a good byte before damage and says where the damage is;
* ``browse/shards.py`` (paging through shards): :func:`new_decompressor` (a gzip decompressor can be
  copied, so a page can resume where the last one stopped) and :func:`open_stream`.

The compression of a file is **sniffed from its first bytes** (:func:`sniff_compression`: gzip
``1f 8b``, zstd ``28 b5 2f fd`` or a zstd skippable frame, bz2 ``BZh``, xz ``fd 37 7a 58 5a 00``),
never trusted from its name; only a writer goes by the name's suffix.

How :class:`StreamDecoder` treats a damaged file (``gzip -d`` and ``zstd -d`` keep the same bytes):

* concatenated members / frames / streams are one stream; zero bytes *between* two members (a
  block-aligned writer's padding) are skipped;
* bytes after the end of the last member that do not start another one -- appended junk, or
  zero padding to the end of the file -- end the stream: every byte decoded before them is
  kept and :class:`Damage` (``trailing``) gives their offset (xz's own stream padding, zero
  bytes in a multiple of four, is valid and ignored);
* a member that fails to decode (``corrupt``) or that the file cuts short (``truncated``): the
  input is fed in small slices, so the output of everything before the failing slice is kept
  (for gzip, which can be copied, to within a few dozen compressed bytes of the damage); the
  damage's offset is where the damaged member starts (or, cut short, where the file ends).
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, BinaryIO, Literal

from marin_assets.execution.storage import filesystem

Codec = Literal["gzip", "zstd", "bz2", "xz"]
Compression = Literal["gzip", "zstd", "bz2", "xz", "none"]

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BZ2_MAGIC = b"BZh"
XZ_MAGIC = b"\xfd7zXZ\x00"
MAGICS: dict[Codec, bytes] = {"gzip": GZIP_MAGIC, "zstd": ZSTD_MAGIC, "bz2": BZ2_MAGIC, "xz": XZ_MAGIC}
# What each codec calls the unit a file concatenates (the words of the damage messages).
_UNIT = {"gzip": "gzip member", "zstd": "zstd frame", "bz2": "bz2 stream", "xz": "xz stream"}

# gzip level 1 / zstd level 1: intermediate files read once or twice by the next stages, so
# compression speed matters more than size (measured on stdlib text: ISA-L gzip-1 ~500 MB/s,
# zstd-1 ~430 MB/s and 10% smaller, zlib gzip-1 ~140 MB/s).
GZIP_LEVEL = 1
ZSTD_LEVEL = 1

try:  # ISA-L gzip (optional): same format as zlib's, several times faster
    from isal import igzip as _igzip
    from isal import isal_zlib as _gzip_zlib
except ImportError:  # pragma: no cover - exercised where isal is not installed
    import gzip as _igzip

    _gzip_zlib = zlib


def compression_for(path: str) -> Compression:
    """The compression a writer uses for ``path``: by suffix (``.gz``, ``.zst``, ``.bz2``, ``.xz``), else none."""
    for suffix, codec in ((".gz", "gzip"), (".zst", "zstd"), (".bz2", "bz2"), (".xz", "xz")):
        if path.endswith(suffix):
            return codec  # type: ignore[return-value]
    return "none"


def is_zstd_skippable(head: bytes) -> bool:
    """True when ``head`` starts with a zstd skippable frame (RFC 8878: magic 0x184D2A50-5F, LE)."""
    return len(head) >= 8 and head[1:4] == b"\x2a\x4d\x18" and 0x50 <= head[0] <= 0x5F


def sniff_compression(head: bytes) -> Compression:
    """The compression of a file whose first bytes are ``head`` (magic numbers, not names)."""
    for codec, magic in MAGICS.items():
        if head.startswith(magic):
            return codec
    return "zstd" if is_zstd_skippable(head) else "none"


def skip_zstd_skippable(handle: BinaryIO, head: bytes) -> tuple[bytes, bool]:
    """(the first bytes after any leading zstd skippable frames, whether there were any).

    Seeks ``handle`` past each frame's declared size; the caller seeks back to 0 to read (the
    zstd decoder skips such frames itself). Used to sniff what a zstd file holds."""
    skipped = False
    pos = 0
    while is_zstd_skippable(head):
        skipped = True
        pos += 8 + int.from_bytes(head[4:8], "little")
        handle.seek(pos)
        head = handle.read(len(head) or 4096)
    return head, skipped


# ------------------------------------------------------------------------------------------
# Writing


class Compressor:
    """Incremental compressor with a zlib-like ``compress`` / ``flush`` interface (``none``: identity)."""

    def __init__(self, compression: Compression) -> None:
        self.compression = compression
        if compression == "gzip":  # wbits 31: gzip container, mtime 0 (same input, same bytes)
            self._obj: Any = _gzip_zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        elif compression == "zstd":
            import zstandard

            self._obj = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
        elif compression == "bz2":
            self._obj = bz2.BZ2Compressor()
        elif compression == "xz":
            self._obj = lzma.LZMACompressor()
        else:
            self._obj = None

    def compress(self, data: bytes) -> bytes:
        return data if self._obj is None else self._obj.compress(data)

    def flush(self) -> bytes:
        return b"" if self._obj is None else self._obj.flush()


def compress(data: bytes, compression: Compression) -> bytes:
    """``data`` compressed as one gzip member / zstd frame / bz2 or xz stream (or unchanged)."""
    comp = Compressor(compression)
    return comp.compress(data) + comp.flush()


# ------------------------------------------------------------------------------------------
# Reading whole (trusted) files


class _ClosingReader:
    """A decompressing reader that also closes the raw file under it."""

    def __init__(self, reader: Any, raw: Any) -> None:
        self._reader, self._raw = reader, raw

    def read(self, size: int = -1) -> bytes:
        return self._reader.read(size)

    def close(self) -> None:
        try:
            self._reader.close()
        finally:
            self._raw.close()

    def __enter__(self) -> _ClosingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stream(raw: BinaryIO, codec: Compression) -> IO[bytes]:
    """A binary stream of the decompressed content of the open file ``raw`` (closed with it).

    Strict: damage raises (``zlib.error``, ``zstandard.ZstdError``, ``OSError``, ``EOFError``);
    untrusted input goes through :class:`StreamDecoder` instead.
    """
    if codec == "gzip":
        return _ClosingReader(_igzip.GzipFile(fileobj=raw, mode="rb"), raw)
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)
    if codec == "bz2":
        return _ClosingReader(bz2.BZ2File(raw, "rb"), raw)
    if codec == "xz":
        return _ClosingReader(lzma.LZMAFile(raw, "rb"), raw)
    return raw


def open_decompressed(path: str) -> IO[bytes]:
    """A binary stream of the content of ``path``, decompressed by what its first bytes say."""
    fs, p = filesystem(path)
    raw = fs.open(p, "rb")
    try:
        codec = sniff_compression(raw.read(8))
        raw.seek(0)
        return open_stream(raw, codec)
    except BaseException:
        raw.close()
        raise


# ------------------------------------------------------------------------------------------
# Decoding untrusted streams


def new_decompressor(codec: Codec) -> Any:
    """An incremental decompressor of one gzip (or zlib) member / zstd frame / bz2 or xz stream.

    It has ``decompress``, ``eof`` and ``unused_data``; a gzip one also ``copy`` and
    ``decompress(data, max_length)`` with ``unconsumed_tail``.
    """
    if codec == "gzip":
        return zlib.decompressobj(wbits=47)  # 47: gzip or zlib header, auto-detected
    if codec == "bz2":
        return bz2.BZ2Decompressor()
    if codec == "xz":
        return lzma.LZMADecompressor()
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj()


def decompress_head(codec: Codec, data: bytes, size: int) -> bytes:
    """At most the first ``size`` decompressed bytes of ``data`` (a file's head), never more
    decompressed than that: a sniff costs the same whatever the ratio. Damage raises."""
    if codec == "zstd":
        import io

        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read(size)
    return new_decompressor(codec).decompress(data, size)


@dataclass(frozen=True)
class Damage:
    """Why a compressed stream stopped before the end of its file.

    ``kind``: ``trailing`` (bytes after the end of the stream that start no member), ``corrupt``
    (a member that does not decode), ``truncated`` (the file ends inside a member). ``offset``:
    the byte offset in the file where the damage begins -- the first trailing byte, the start of
    the corrupt member, or the end of the file that cuts a member short; ``detail`` says what
    happened in words, with the other offsets (where decoding failed, where the cut member starts).
    """

    kind: Literal["trailing", "corrupt", "truncated"]
    offset: int
    detail: str


# Compressed bytes fed to a decompressor at a time. A failing call takes its output with it:
# zstd / bz2 / xz get small slices (they emit whole blocks anyway); a failing gzip slice is
# replayed from a copy of the decompressor in pieces of _REPLAY bytes. zstd's decompressor takes no
# output limit, so its slices are small enough to bound what one call can give: a zstd block of
# 4 bytes (RLE) regenerates at most 128 KiB, so 256 bytes give at most 8 MiB. bz2 is decoded without
# an output limit too (see _feed): a bz2 block is at least ~40 compressed bytes and at most ~46 MB
# decoded (900 kB after RLE1, runs of 255 in 5 bytes), so 128 bytes complete at most 3 blocks.
_SLICE = {"gzip": 64 << 10, "zstd": 256, "bz2": 128, "xz": 4 << 10}
_REPLAY = 64
MAX_PIECE = 1 << 20
"""The most decompressed bytes one step of :class:`StreamDecoder` hands out (gzip, bz2 and xz;
zstd: at most 8 MiB), whatever the compression ratio: a reader's memory follows its own limits,
never a bomb's ratio (1 MiB of gzip can hold 1 GiB, of bz2 far more). bz2 decodes up to 3 whole
blocks (worst case ~140 MB, a bomb's; ~1 MB for text) before handing them out in such pieces."""


class _Failed(Exception):
    def __init__(self, partial: bytes, at: int, error: Exception) -> None:
        super().__init__(str(error))
        self.partial, self.at, self.error = partial, at, error


class StreamDecoder:
    """Incremental decoder of an untrusted compressed byte stream: member after member, damage located.

    Feed the file's bytes in order with :meth:`decode` (returns the decompressed bytes), then call
    :meth:`finish`. Once :attr:`damage` is set, nothing more is decoded. With ``track_members``,
    :attr:`members` lists ``(decompressed offset, compressed offset)`` of each member's start
    (Common Crawl's per-record gzip members: the record's offset in the file); the caller may trim it.
    """

    def __init__(self, codec: Codec, track_members: bool = False) -> None:
        self.codec = codec
        self.track_members = track_members
        self.members: list[tuple[int, int]] = []
        self.consumed = 0  # compressed bytes taken in so far
        self.produced = 0  # decompressed bytes handed out so far
        self.damage: Damage | None = None
        self._magic = MAGICS[codec]
        self._slice = _SLICE[codec]
        self._decomp: Any = None  # the current member's decompressor; None between members
        self._member_start = 0
        self._held = b""  # bytes between members, too few yet to tell whether a member starts
        self._zeros_from: int | None = None  # offset of a run of zero bytes between members

    # -- feeding

    def decode(self, chunk: bytes) -> bytes:
        """The decompressed bytes of the next ``chunk`` of the file (all of them before any damage).

        Joined whole: for input whose ratio is trusted or bounded by the caller; an untrusted
        stream is read with :meth:`decode_pieces`."""
        return b"".join(self.decode_pieces(chunk))

    def decode_pieces(self, chunk: bytes) -> Iterator[bytes]:
        """The decompressed bytes of the next ``chunk`` of the file, in pieces of at most
        :data:`MAX_PIECE` bytes (zstd: 8 MiB), however far they expand. Consume every piece
        before feeding the next chunk."""
        if self.damage is not None or not chunk:
            self.consumed += len(chunk)
            return
        data = self._held + chunk if self._held else chunk
        base = self.consumed - len(self._held)  # file offset of data[0]
        self._held = b""
        self.consumed += len(chunk)
        view = memoryview(data)
        pos = 0
        while pos < len(data) and self.damage is None:
            if self._decomp is None:
                pos = self._start_member(data, pos, base)
                continue
            piece = view[pos : pos + self._slice]  # a view: no copy of the rest of the chunk per member
            try:
                for got in self._feed(piece):
                    self.produced += len(got)
                    yield got
            except _Failed as failed:
                self.produced += len(failed.partial)
                self.damage = Damage(
                    "corrupt",
                    self._member_start,
                    f"corrupt {_UNIT[self.codec]} starting at byte {self._member_start} (decoding failed near byte "
                    f"{base + pos + failed.at}: {failed.error})",
                )
                yield failed.partial
                break
            if self._decomp.eof:
                used = len(piece) - len(self._decomp.unused_data)
                self._decomp = None
                pos += used
            else:
                pos += len(piece)

    def _start_member(self, data: bytes, pos: int, base: int) -> int:
        """Between members at ``data[pos]``: skip zero bytes, start the next member or call the rest trailing."""
        nonzero = pos if data[pos] else len(data) - len(data[pos:].lstrip(b"\x00"))
        if nonzero > pos and self._zeros_from is None:
            self._zeros_from = base + pos
        if nonzero == len(data):
            return nonzero
        head = data[nonzero : nonzero + 8]
        if len(head) < 8:  # too few bytes to tell (no member is shorter): wait for the next chunk or the end
            self._held = head
            return len(data)
        if not (head.startswith(self._magic) or (self.codec == "zstd" and is_zstd_skippable(head))):
            at = self._zeros_from if self._zeros_from is not None else base + nonzero
            self.damage = Damage(
                "trailing",
                at,
                f"bytes after the end of the {self.codec} stream at byte {at} start no {_UNIT[self.codec]}",
            )
            return len(data)
        self._zeros_from = None
        self._member_start = base + nonzero
        if self.track_members:
            self.members.append((self.produced, self._member_start))
        self._decomp = new_decompressor(self.codec)
        return nonzero

    def _feed(self, piece: memoryview) -> Iterator[bytes]:
        """Decode ``piece`` into the current member, in pieces of at most :data:`MAX_PIECE` bytes;
        on failure raise :class:`_Failed` with what came before it."""
        decomp = self._decomp
        if self.codec == "zstd":  # no output limit: the slice is small (see _SLICE)
            try:
                yield decomp.decompress(piece)
            except Exception as exc:  # zstandard.ZstdError
                raise _Failed(b"", 0, exc) from exc
            return
        if self.codec == "bz2":
            # No output limit: bz2 checks a block's CRC once the block is decoded, and a call with
            # max_length hands out a corrupt block's bytes before that (they would read as records).
            # Unlimited, a block's bytes come out whole from the call that completes it, or not at
            # all. The slice is small enough to bound that call (see _SLICE); handed out in pieces.
            try:
                out = decomp.decompress(bytes(piece))
            except Exception as exc:  # OSError: a corrupt block
                raise _Failed(b"", 0, exc) from exc
            for at in range(0, len(out), MAX_PIECE):
                yield out[at : at + MAX_PIECE]
            return
        if self.codec != "gzip":  # xz: the decompressor holds the input it has not decoded yet
            data: bytes = bytes(piece)
            while True:
                try:
                    yield decomp.decompress(data, MAX_PIECE)
                except Exception as exc:  # OSError (bz2), LZMAError
                    raise _Failed(b"", 0, exc) from exc
                data = b""
                if decomp.eof or decomp.needs_input:
                    return
        pending: Any = piece  # gzip: what the last call left unread (it stopped at MAX_PIECE of output)
        while True:
            snapshot = decomp.copy()
            try:
                out = decomp.decompress(pending, MAX_PIECE)
            except Exception as exc:  # zlib.error
                raise self._replayed(snapshot, bytes(pending), len(piece) - len(pending), exc) from exc
            yield out
            pending = decomp.unconsumed_tail
            if not pending or decomp.eof:
                return

    @staticmethod
    def _replayed(snapshot: Any, data: bytes, before: int, error: Exception) -> _Failed:
        """The failure of a gzip call, with the output of its input up to the damage: replayed from
        the copy taken before it, in pieces of :data:`_REPLAY` bytes (``before``: bytes of the slice
        decoded by earlier calls)."""
        parts: list[bytes] = []
        for at in range(0, len(data), _REPLAY):
            try:
                parts.append(snapshot.decompress(data[at : at + _REPLAY], MAX_PIECE))
            except Exception as exc:  # noqa: BLE001 - the damage, found again: what came before is kept
                return _Failed(b"".join(parts), before + at, exc)
            if snapshot.eof:
                break
        return _Failed(b"".join(parts), before + len(data), error)

    def finish(self) -> Damage | None:
        """Call at the end of the file: the damage, if any (a member cut short, trailing bytes)."""
        if self.damage is not None:
            return self.damage
        if self._decomp is not None and not self._decomp.eof:
            self.damage = Damage(
                "truncated",
                self.consumed,
                f"the file ends at byte {self.consumed} inside the {_UNIT[self.codec]} starting at byte "
                f"{self._member_start}",
            )
        elif self._held or self._zeros_from is not None:
            at = self._zeros_from if self._zeros_from is not None else self.consumed - len(self._held)
            padding = self._held == b"" and (self.consumed - at) % 4 == 0
            if not (self.codec == "xz" and padding):  # xz's stream padding is part of the format
                what = "zero bytes" if self._held == b"" else "bytes"
                self.damage = Damage(
                    "trailing",
                    at,
                    f"{self.consumed - at} {what} after the end of the {self.codec} stream at byte {at}",
                )
        return self.damage
