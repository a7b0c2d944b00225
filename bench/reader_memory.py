"""Benchmark: peak memory of the raw reader on a decompression bomb -- a 1.5 GiB line in a ~1.5 MiB gzip.

The file holds a good record, one JSON line of ``--line-mib`` MiB of the same letter (gzip level 9:
about 1,000:1), and another good record. The raw stage's reader (``readers.read_file``, the raw
stage's default ``max_doc_bytes`` of 10 MB, so lines over ~21 MB are refused) reads it in a fresh
child process, which reports its peak RSS (``VmHWM``); a second child reads the two good records
alone (the interpreter and its imports: the baseline). Printed: both peaks, the difference, and the
quarantine reasons (the big line must be ``line_too_long``, both good records kept).

Usage: ``.venv/bin/python -m bench.reader_memory [--line-mib 1536]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib

GOOD = [{"id": "good-1", "text": "A good record before the bomb."}, {"id": "good-2", "text": "And one after it."}]


def write_bomb(path: str, line_mib: int) -> None:
    """Write the gzip: good record, ``{"id": "big", "text": "aaa...a"}`` of ``line_mib`` MiB, good record."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (8 << 20)
    with open(path, "wb") as handle:
        handle.write(comp.compress((json.dumps(GOOD[0]) + "\n").encode()))
        handle.write(comp.compress(b'{"id": "big", "text": "'))
        for _ in range(line_mib // 8):
            handle.write(comp.compress(block))
        handle.write(comp.compress(b'"}\n' + (json.dumps(GOOD[1]) + "\n").encode()))
        handle.write(comp.flush())


def peak_rss_mib() -> float:
    """This process's peak resident memory (``VmHWM``: its own, not inherited across exec as
    ``ru_maxrss`` is from the process that started it)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def child(path: str) -> None:
    """Read ``path`` with the raw reader; print ids kept, quarantine reasons and peak RSS (JSON)."""
    from marin_assets.core.shard_stage import Quarantine
    from marin_assets.transform.raw.readers import read_file

    q = Quarantine("raw", os.path.basename(path), "bench")
    start = time.perf_counter()
    fmt, records = read_file(path, os.path.basename(path), 10_000_000, q)
    ids = [record["id"] for _, record in records]
    peak_mib = peak_rss_mib()
    print(
        json.dumps(
            {
                "format": fmt,
                "ids": ids,
                "quarantine": dict(q.counts),
                "peak_mib": peak_mib,
                "seconds": time.perf_counter() - start,
            }
        )
    )


def _run_child(path: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.reader_memory", "--child", path], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print the peak RSS of reading the bomb and of the baseline, side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--line-mib", type=int, default=1536)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="reader-memory-") as tmp:
        bomb = os.path.join(tmp, "bomb.jsonl.gz")
        write_bomb(bomb, args.line_mib)
        small = os.path.join(tmp, "good.jsonl")
        with open(small, "w") as handle:
            handle.writelines(json.dumps(record) + "\n" for record in GOOD)
        base = _run_child(small)
        big = _run_child(bomb)
        bomb_mib = os.path.getsize(bomb) / 2**20
    print(f"bomb: {bomb_mib:.2f} MiB gzip holding a {args.line_mib} MiB line (load {os.getloadavg()[0]:.1f})")
    print(f"baseline (2 good records): peak RSS {base['peak_mib']:.0f} MiB")
    print(
        f"bomb: peak RSS {big['peak_mib']:.0f} MiB (+{big['peak_mib'] - base['peak_mib']:.0f} MiB over the baseline), "
        f"{big['seconds']:.1f} s, kept {big['ids']}, quarantined {big['quarantine']}"
    )
    print(f"ratio of peaks bomb / baseline: {big['peak_mib'] / base['peak_mib']:.2f}")


if __name__ == "__main__":
    main()
