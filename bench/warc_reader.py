"""Benchmark: the raw stage's checked WARC reader vs FastWARC's bare iteration, same bytes, same process.

* **Baseline**: FastWARC's ``ArchiveIterator`` over the whole file (HTTP parsed, bodies decoded),
  each page turned into the same document by ``warc_reader._warc_document`` -- what the reader did
  before it checked record boundaries (it trusted ``Content-Length``).
* **Checked**: ``warc_reader.read_warc`` -- our decompression, the boundary scan of every record
  (resync on a lying ``Content-Length``), then FastWARC on each record's own bytes.

Pages are the sample generator's HTML (``--docs`` of them), written as gzip-per-record (Common
Crawl's layout), plain and one zstd frame. Each variant runs ``--repeat`` times, interleaved; the
best wall time of each is compared and the documents are checked to be the same.

Usage: ``.venv/bin/python -m bench.warc_reader [--docs 4000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import gzip
import io
import time

import zstandard

from marin_assets.core.shard_stage import Quarantine
from marin_assets.experiments.sample_data import SampleConfig, iter_pages
from marin_assets.transform.raw.warc_reader import _Position, _warc_document, read_warc
from marin_assets.transform.raw.warc_writer import WarcPage, encode_warc_gz


def _baseline(data: bytes) -> list[dict]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    wanted = WarcRecordType.response | WarcRecordType.conversion | WarcRecordType.resource
    iterator = ArchiveIterator(io.BytesIO(data), record_types=wanted, parse_http=True, auto_decode="all")
    return [doc for record in iterator if (doc := _warc_document(record, _Position(record.stream_pos, ""))) is not None]


def _checked(data: bytes, codec: str | None) -> list[dict]:
    return [doc for _, doc in read_warc(io.BytesIO(data), Quarantine("raw", "bench"), codec) if doc is not None]


def main() -> None:
    """Print, per layout, the best times and the ratio checked / baseline."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    pages = [
        WarcPage(p.id, p.url, "2024-01-01T00:00:00Z", p.html)
        for p in iter_pages("drop-001", SampleConfig(docs_per_drop=args.docs))
    ]
    per_record = encode_warc_gz(pages)
    plain = gzip.decompress(per_record)
    layouts = {
        "gzip per record": (per_record, "gzip"),
        "plain": (plain, None),
        "zstd one frame": (zstandard.ZstdCompressor().compress(plain), "zstd"),
    }
    print(f"{len(pages)} sample pages, {len(plain) / 1e6:.1f} MB of WARC")
    for name, (data, codec) in layouts.items():
        best_base = best_checked = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            base = _baseline(data)
            best_base = min(best_base, time.perf_counter() - start)
            start = time.perf_counter()
            checked = _checked(data, codec)
            best_checked = min(best_checked, time.perf_counter() - start)
        same = [d["text"] for d in base] == [d["text"] for d in checked] and len(checked) == len(pages)
        print(
            f"{name:16s} baseline {best_base:.3f}s  checked {best_checked:.3f}s  "
            f"ratio {best_checked / best_base:.2f}  ({len(checked) / best_checked:,.0f} docs/s; same documents: {same})"
        )


if __name__ == "__main__":
    main()
