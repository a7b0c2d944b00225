"""Output shards are JSON: a NaN or Infinity float is written as the string ``"NaN"`` /
``"Infinity"`` / ``"-Infinity"`` (as the raw readers spell them), never as the bare tokens that
strict JSON readers reject (issue 30, item 10)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from marin_assets.core import io


def _strict_loads(line: bytes | str):
    """``json.loads`` that refuses NaN/Infinity, as every non-Python JSON reader does."""

    def refuse(token: str):
        raise ValueError(f"not JSON: {token}")

    return json.loads(line, parse_constant=refuse)


RECORD = {
    "id": "doc-1",
    "score": math.nan,
    "scores": [1.5, math.inf, -math.inf, {"deep": math.nan}],
    "pair": (math.nan, 2.0),
    "np": np.float64("nan"),
    "big": 2**70,  # json's path (orjson refuses ints beyond 64 bits)
    "ok": 0.25,
}
EXPECTED = {
    "id": "doc-1",
    "score": "NaN",
    "scores": [1.5, "Infinity", "-Infinity", {"deep": "NaN"}],
    "pair": ["NaN", 2.0],
    "np": "NaN",
    "big": 2**70,
    "ok": 0.25,
}


@pytest.mark.parametrize("encode", [io.dumpb, io.dumps], ids=["dumpb", "dumps"])
def test_non_finite_floats_are_written_as_text(encode):
    assert _strict_loads(encode(RECORD)) == EXPECTED
    # orjson's path too (no int beyond 64 bits), and json's path for a lone surrogate
    for record in ({"x": math.nan, "y": [math.inf]}, {"x": math.nan, "s": "\ud800"}):
        assert _strict_loads(encode(record))["x"] == "NaN"
    assert _strict_loads(encode({"none": None, "x": -math.inf})) == {"none": None, "x": "-Infinity"}


@pytest.mark.parametrize("name", ["shard.jsonl.gz", "shard.jsonl.zst", "shard.jsonl"])
def test_shards_with_non_finite_floats_load_with_a_strict_reader(tmp_path, name):
    from marin_assets.core.compression import open_decompressed

    records = [RECORD, {"id": "doc-2", "v": 1.0}]
    shard = tmp_path / "shard" / name
    io.write_jsonl_shard(str(shard), records)
    streamed = tmp_path / "streamed" / name
    with io.JsonlShardWriter(str(streamed)) as writer:
        for record in records:
            writer.write(record)
    for path in (shard, streamed):
        with open_decompressed(str(path)) as stream:
            lines = stream.read().splitlines()
        assert [_strict_loads(line) for line in lines] == [EXPECTED, {"id": "doc-2", "v": 1.0}]
        assert list(io.read_jsonl(str(path))) == [EXPECTED, {"id": "doc-2", "v": 1.0}]


def test_write_json_is_valid_json_and_other_errors_still_raise(tmp_path):
    path = tmp_path / "meta.json"
    io.write_json(str(path), {"loss": math.nan, "n": 3})
    assert _strict_loads(path.read_text()) == {"loss": "NaN", "n": 3}
    circular: list = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        io.dumps(circular)
