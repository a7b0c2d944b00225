"""The one compression layer (issue 22): every reader decompresses through ``core/compression.py``,
no reader circle, and its stream decoder finds the same damage however the file is cut into reads."""

from __future__ import annotations

import ast
import bz2
import gzip
import lzma
from pathlib import Path

import pytest
import zstandard

from marin_assets.core.compression import StreamDecoder, compress

ROOT = Path(__file__).resolve().parents[2] / "marin_assets"
READERS = ("core/io.py", "transform/raw/readers.py", "transform/raw/warc_reader.py", "browse/shards.py")
CODEC_MODULES = {"zlib", "gzip", "bz2", "lzma", "zstandard", "isal"}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside functions."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", READERS)
def test_every_reader_decompresses_through_the_one_layer(module):
    imported = _imports(ROOT / module)
    assert "marin_assets.core.compression" in imported
    assert not {name.split(".")[0] for name in imported} & CODEC_MODULES, imported


def test_no_circle_between_the_raw_readers():
    """warc_reader.py sits below readers.py: it imports nothing of it, and readers.py imports it
    at module level (no lazy import hiding a circle)."""
    assert "marin_assets.transform.raw.readers" not in _imports(ROOT / "transform/raw/warc_reader.py")
    tree = ast.parse((ROOT / "transform/raw/readers.py").read_text())
    top = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
    assert "marin_assets.transform.raw.warc_reader" in top


LINES = b"".join(b'{"id": "d%d", "text": "some words here"}\n' % i for i in range(400))
PACKERS = {
    "gzip": gzip.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


def _decode(codec: str, data: bytes, read: int) -> tuple[bytes, object]:
    decoder = StreamDecoder(codec)  # type: ignore[arg-type]
    out = b"".join(decoder.decode(data[i : i + read]) for i in range(0, len(data), read))
    return out, decoder.finish()


@pytest.mark.parametrize("codec", list(PACKERS))
@pytest.mark.parametrize("read", [1, 7, 4096, 1 << 20])
def test_damage_found_the_same_for_any_read_size(codec, read):
    """Two members, zero padding between them, then junk: the same bytes and the same damage
    (kind and offset) whether the file arrives a byte at a time or whole."""
    first, second = PACKERS[codec](LINES[:5000]), PACKERS[codec](LINES[5000:])
    padded = first + b"\x00" * 512 + second
    out, damage = _decode(codec, padded + b"JUNK", read)
    assert out == LINES
    assert (damage.kind, damage.offset) == ("trailing", len(padded))
    out, damage = _decode(codec, padded[:-9], read)  # cut inside the second member
    assert LINES[:5000] == out[:5000] and LINES.startswith(out)
    assert (damage.kind, damage.offset) == ("truncated", len(padded) - 9)
    out, damage = _decode(codec, compress(LINES, codec), read)  # the layer's own writer: whole
    assert out == LINES and damage is None
