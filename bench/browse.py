"""First page of every shard of a big drop in the data browser, against reading one shard whole.

``python -m bench.browse [SIZE_MB]`` (default 1024) writes a drop of about SIZE_MB compressed
(8 gzip jsonl shards of random-word documents, co-sharded attribute files, ``.executor_info`` and
an experiment record, as a curation step leaves them) under a temp dir, then in one process:

* baseline: decompress and parse one whole shard (what a reader without paging does);
* the browser's first page of each shard (a fresh app, so no resume points help), its attributes
  joined, and the RSS of the process before and after paging 50 pages forward.

Prints one JSON line: seconds per first page (max, mean), baseline seconds, their ratio, RSS.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import sys
import tempfile
import time

import psutil

from marin_assets.browse.server import BrowserApp
from marin_assets.core.io import read_jsonl_gz

SHARDS = 8


def write_drop(root: str, size_mb: int) -> list[str]:
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    pool = [" ".join(rng.choices(words, k=rng.randint(200, 1200))) for _ in range(4000)]
    docs_out = os.path.join(root, "bench", "text-aaaaaa", "drop-001")
    attrs_out = os.path.join(root, "bench", "quality-bbbbbb", "drop-001")
    names = []
    per_shard = size_mb * (1 << 20) // SHARDS
    n = 0
    for s in range(SHARDS):
        name = f"shard-{s:05d}.jsonl.gz"
        names.append(name)
        os.makedirs(os.path.join(docs_out, "docs"), exist_ok=True)
        os.makedirs(os.path.join(attrs_out, "attributes"), exist_ok=True)
        path = os.path.join(docs_out, "docs", name)
        with (
            gzip.open(path, "wt", compresslevel=1) as docs,
            gzip.open(os.path.join(attrs_out, "attributes", name), "wt", compresslevel=1) as attrs,
        ):
            while True:
                for _ in range(1000):
                    doc_id = f"drop-001-{n:08d}"
                    docs.write(json.dumps({"id": doc_id, "text": rng.choice(pool), "source": "bench"}) + "\n")
                    attrs.write(json.dumps({"id": doc_id, "attributes": {"quality_hq": round(rng.random(), 4)}}) + "\n")
                    n += 1
                docs.flush()
                if os.path.getsize(path) >= per_shard:
                    break
    for out, name, config in (
        (docs_out, "bench/text", {"output_path": docs_out}),
        (attrs_out, "bench/quality", {"input_path": docs_out, "output_path": attrs_out}),
    ):
        with open(os.path.join(out, ".executor_info"), "w") as handle:
            json.dump({"name": name, "partition": "drop-001", "config": config}, handle)
    steps = [
        {"name": "bench/text", "output_path": os.path.dirname(docs_out), "partitioned_by": "drops"},
        {"name": "bench/quality", "output_path": os.path.dirname(attrs_out), "partitioned_by": "drops"},
    ]
    os.makedirs(os.path.join(root, "experiments"), exist_ok=True)
    with open(os.path.join(root, "experiments", "bench-000000.json"), "w") as handle:
        json.dump({"steps": steps, "partitions": {"drops": ["drop-001"]}}, handle)
    return [f"bench/text-aaaaaa/drop-001/docs/{name}" for name in names]


def main() -> None:
    size_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    root = tempfile.mkdtemp(prefix="bench-browse-")
    try:
        start = time.monotonic()
        shards = write_drop(root, size_mb)
        written = sum(os.path.getsize(os.path.join(root, s)) for s in shards)
        setup_s = time.monotonic() - start
        process = psutil.Process()
        start = time.monotonic()
        records = sum(1 for _ in read_jsonl_gz(os.path.join(root, shards[0])))
        baseline_s = time.monotonic() - start
        firsts = []
        for shard in shards:
            app = BrowserApp(root)
            start = time.monotonic()
            response = app.get(f"/browse/{shard}?n=20")
            firsts.append(time.monotonic() - start)
            assert response.status == 200 and "quality_hq" in response.body, response.body[:500]
        app = BrowserApp(root)
        rss_before = process.memory_info().rss
        peak = rss_before
        page_start = 0
        start = time.monotonic()
        for _ in range(50):
            assert app.get(f"/browse/{shards[0]}?n=20&start={page_start}").status == 200
            page_start += 20
            peak = max(peak, process.memory_info().rss)
        paging_s = time.monotonic() - start
        print(
            json.dumps(
                {
                    "drop_mb": round(written / 2**20),
                    "shards": len(shards),
                    "records_per_shard": records,
                    "write_s": round(setup_s, 1),
                    "baseline_read_one_shard_s": round(baseline_s, 3),
                    "first_page_max_s": round(max(firsts), 3),
                    "first_page_mean_s": round(sum(firsts) / len(firsts), 3),
                    "first_page_vs_baseline": round(max(firsts) / baseline_s, 4),
                    "paging_50_pages_s": round(paging_s, 3),
                    "rss_mib_before_paging": round(rss_before / 2**20),
                    "rss_mib_peak_paging": round(peak / 2**20),
                }
            )
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
