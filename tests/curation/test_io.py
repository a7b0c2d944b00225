"""Shard I/O between curation stages: formats sniffed by content, streamed, atomic, exact JSON."""

from __future__ import annotations

import gzip
import json
import math
import os

import pytest
import zstandard

from marin_assets.core import compression, io

RECORDS = [
    {"id": f"doc-{i}", "text": "héllo wörld 数据 🎉\n" * (i % 7), "metadata": {"n": i, "score": i / 3}}
    for i in range(3000)
]
SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl")


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_written_shards_read_back_in_every_format(tmp_path, suffix):
    path = str(tmp_path / f"shard{suffix}")
    size = io.write_jsonl_shard(path, RECORDS)
    assert size == os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(4)
    assert compression.sniff_compression(head) == compression.compression_for(path)
    assert list(io.read_jsonl(path)) == RECORDS
    streamed = str(tmp_path / f"streamed{suffix}")
    with io.JsonlShardWriter(streamed) as writer:
        for record in RECORDS:
            writer.write(record)
    assert writer.records == len(RECORDS) and list(io.read_jsonl(streamed)) == RECORDS
    assert [name for name in os.listdir(tmp_path) if name.startswith(".")] == []  # no temporary leftovers


def test_compressed_shards_are_standard_gzip_and_zstd(tmp_path):
    text = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in RECORDS[:100])
    gz = io.encode_jsonl(RECORDS[:100], "gzip")
    assert gz == io.encode_jsonl(RECORDS[:100], "gzip")  # deterministic (mtime 0)
    assert [json.loads(line) for line in gzip.decompress(gz).splitlines()] == RECORDS[:100]
    zst = io.encode_jsonl(RECORDS[:100], "zstd")
    out = zstandard.ZstdDecompressor().stream_reader(zst).read()
    assert [json.loads(line) for line in out.splitlines()] == [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("content", "name"), [("gzip", "misnamed.jsonl"), ("zstd", "misnamed.jsonl.gz"), ("none", "misnamed.jsonl.zst")]
)
def test_reader_trusts_content_not_the_file_name(tmp_path, content, name):
    path = tmp_path / name
    path.write_bytes(io.encode_jsonl(RECORDS[:50], content))
    assert list(io.read_jsonl(str(path))) == RECORDS[:50]


def test_concatenated_members_and_frames_are_read_whole(tmp_path):
    gz = tmp_path / "two.jsonl.gz"
    gz.write_bytes(io.encode_jsonl(RECORDS[:10], "gzip") + io.encode_jsonl(RECORDS[10:20], "gzip"))
    zst = tmp_path / "two.jsonl.zst"
    zst.write_bytes(io.encode_jsonl(RECORDS[:10], "zstd") + io.encode_jsonl(RECORDS[10:20], "zstd"))
    assert list(io.read_jsonl(str(gz))) == RECORDS[:20]
    assert list(io.read_jsonl(str(zst))) == RECORDS[:20]


def test_line_blocks_keep_line_numbers_and_long_lines(tmp_path):
    lines = [b'{"a": 1}', b"", b'{"long": "' + b"x" * 5000 + b'"}', b'{"b": 2}', b'{"last": "no newline"}']
    path = tmp_path / "lines.jsonl.gz"
    path.write_bytes(compression.compress(b"\n".join(lines), "gzip"))
    blocks = list(io.iter_line_blocks(str(path), block_bytes=64))
    assert all(block.endswith(b"\n") for _, block in blocks[:-1])
    assert b"".join(block for _, block in blocks) == b"\n".join(lines)
    numbered = [pair for first, block in blocks for pair in io.iter_block_records(block, str(path), first)]
    assert [n for n, _ in numbered] == [1, 3, 4, 5]
    assert numbered[1][1]["long"] == "x" * 5000


def test_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl.zst"
    path.write_bytes(compression.compress(b'{"ok": 1}\n{"ok": 2}\n{"broken"\n', "zstd"))
    with pytest.raises(io.ShardFormatError, match=rf"{path}:3: not a JSON record"):
        list(io.read_jsonl(str(path)))


def test_truncated_gzip_is_an_error_not_silent_loss(tmp_path):
    data = io.encode_jsonl(RECORDS, "gzip")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(EOFError):
        list(io.read_jsonl(str(path)))


def test_json_codec_matches_json_where_orjson_differs(tmp_path):
    tricky = [
        {"big": 2**70, "digits": "1234567890123456789012"},
        {"nan": math.inf, "none": None},
        {"surrogate": "\ud800x"},
        {"float": 1e-7, "unicode": "naïve — ✓"},
    ]
    path = str(tmp_path / "tricky.jsonl.gz")
    io.write_jsonl_shard(path, tricky)
    back = list(io.read_jsonl(path))
    assert back[0] == tricky[0] and isinstance(back[0]["big"], int)
    assert back[1]["nan"] == "Infinity" and back[1]["none"] is None  # not JSON as a number: written as text
    assert back[2:] == tricky[2:]
    assert io.loadb(io.dumpb(tricky[3])) == json.loads(io.dumps(tricky[3]))


def test_streaming_writer_leaves_nothing_when_the_block_raises(tmp_path):
    path = tmp_path / "out.jsonl.zst"
    with pytest.raises(RuntimeError), io.JsonlShardWriter(str(path)) as writer:
        writer.write(RECORDS[0])
        raise RuntimeError("stage died")
    assert os.listdir(tmp_path) == []


def test_streaming_writer_on_gcs_commits_on_close_only(gcs_prefix):
    import fsspec

    fs = fsspec.filesystem("gs")
    good, bad = f"{gcs_prefix}/io/good.jsonl.gz", f"{gcs_prefix}/io/bad.jsonl.gz"
    with io.JsonlShardWriter(good) as writer:
        for record in RECORDS:
            writer.write(record)
    assert list(io.read_jsonl(good)) == RECORDS
    with pytest.raises(RuntimeError), io.JsonlShardWriter(bad) as writer:
        writer.write(RECORDS[0])
        raise RuntimeError("stage died")
    assert not fs.exists(bad)
    assert io.list_files(f"{gcs_prefix}/io", SUFFIXES) == [good]


def test_records_carry_their_line_in_the_file(tmp_path):
    lines = [b'{"a": 1}', b"", b"   ", b'{"b": 2}', b'{"long": "' + b"y" * 300 + b'"}', b'{"last": 3}']
    path = tmp_path / "numbered.jsonl.gz"
    path.write_bytes(compression.compress(b"\n".join(lines), "gzip"))  # no final newline
    for block_bytes in (7, 64, 1 << 20):  # blocks that cut lines, hold a few, hold all
        numbered = list(io.iter_records(str(path), block_bytes))
        assert [n for n, _ in numbered] == [1, 4, 5, 6]
        assert numbered[0][1] == {"a": 1} and numbered[3][1] == {"last": 3}


def test_decoding_matches_json_on_what_fast_decoders_get_wrong():
    lines = [b'{"big": 1' + b"0" * 40 + b"}", b'{"nan": NaN, "inf": -Infinity}', b'{"s": "\\ud800x"}', b'{"f": 1e400}']
    lines += [b'{"dup": 1, "dup": 2}', b'{"neg0": -0.0, "tiny": 1e-7}', b'{"int64": 9223372036854775808}']
    for line in lines:
        assert repr(io.loadb(line)) == repr(json.loads(line)), line
    assert type(io.loadb(lines[0])["big"]) is int


def test_deferred_commits_finish_before_the_block_ends(tmp_path):
    paths = [str(tmp_path / f"docs/shard-{i}.jsonl.gz") for i in range(3)]
    with io.deferred_commits():
        for path in paths:
            with io.JsonlShardWriter(path) as writer:
                for record in RECORDS[:100]:
                    writer.write(record)
    for path in paths:
        assert list(io.read_jsonl(path)) == RECORDS[:100]
    assert [n for n in os.listdir(tmp_path / "docs") if n.startswith(".")] == []


def test_a_failed_deferred_commit_is_raised_and_leaves_no_file(tmp_path):
    target = tmp_path / "out.jsonl.gz"
    target.mkdir()  # a folder where the file should go: the rename fails
    with pytest.raises(OSError), io.deferred_commits(), io.JsonlShardWriter(str(target)) as writer:
        writer.write(RECORDS[0])
    assert os.listdir(tmp_path) == ["out.jsonl.gz"] and os.listdir(target) == []


def test_streaming_writer_refuses_to_commit_after_the_lease_is_lost(tmp_path):
    from marin_assets.execution.fence import LeaseLostError, activate

    class LostLease:
        def check(self) -> None:
            raise LeaseLostError("taken over")

        def on_lost(self, callback):
            return lambda: None

    path = tmp_path / "zombie.jsonl.gz"
    with pytest.raises(LeaseLostError), activate(LostLease()), io.JsonlShardWriter(str(path)) as writer:
        writer.write(RECORDS[0])
    assert os.listdir(tmp_path) == []
