"""First page of every shard of a big drop in the data browser, against reading one shard whole.

``python -m bench.browse [SIZE_MB]`` (default 1024) writes a drop of about SIZE_MB compressed
(8 gzip jsonl shards of random-word documents, co-sharded attribute files, ``.executor_info`` and
an experiment record, as a curation step leaves them) under a temp dir, then in one process:

* baseline: decompress and parse one whole shard (what a reader without paging does);
* the browser's first page of each shard (a fresh app, so no resume points help), its attributes
  joined, and the RSS of the process before and after paging 50 pages forward.

Prints one JSON line: seconds per first page (max, mean), baseline seconds, their ratio, RSS.

``python -m bench.browse parquet [SIZE_MB]`` (default 400) writes one parquet file of about SIZE_MB
in ONE row group (pyarrow's default pages; ``$ROW_KB`` (20) KB of text a row) and starts the browser server
(``python -m marin_assets.browse``) on it, then measures the server process's peak RSS (sampled
every 10 ms) serving a page of it alone, then 8 pages at once (different starts), its RSS after,
and its thread count with 50 idle connections open and after its idle timeout. Baseline, in a fresh
process: the peak RSS of reading that row group whole (``ParquetFile.read_row_group``).
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


def write_one_row_group_parquet(path: str, size_mb: int) -> int:
    """A parquet file of about ``size_mb`` MiB of text in one row group; returns its row count."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq

    row_bytes = int(os.environ.get("ROW_KB", "20")) << 10
    rows = max(1, (size_mb << 20) // row_bytes)
    blob = base64.b64encode(os.urandom(rows * row_bytes * 3 // 4)).decode()  # incompressible text
    text = pa.array([blob[i * row_bytes : (i + 1) * row_bytes] for i in range(rows)])
    del blob
    table = pa.table({"id": [f"doc-{i:08d}" for i in range(rows)], "text": text})
    pq.write_table(table, path, row_group_size=rows, compression="none")
    return rows


_WHOLE_GROUP = (
    "import resource, sys, pyarrow.parquet as pq; t = pq.ParquetFile(sys.argv[1]).read_row_group(0); "
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
)


class RssSampler:
    """Peak RSS of a process, sampled every 10 ms in a thread."""

    def __init__(self, process: psutil.Process) -> None:
        import threading

        self.process, self.peak, self._stop = process, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self.peak = self.process.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def parquet_main(size_mb: int) -> None:
    import socket
    import subprocess
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    root = tempfile.mkdtemp(prefix="bench-browse-parquet-")
    server = None
    try:
        path = os.path.join(root, "one_group.parquet")
        start = time.monotonic()
        rows = write_one_row_group_parquet(path, size_mb)
        write_s = time.monotonic() - start
        whole = subprocess.run([sys.executable, "-c", _WHOLE_GROUP, path], capture_output=True, text=True, check=True)
        baseline_peak = int(whole.stdout.strip())
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        idle_timeout_s = 2.0
        server = subprocess.Popen(
            [sys.executable, "-m", "marin_assets.browse", "--prefix", root, "--port", str(port),
             "--idle_timeout_s", str(idle_timeout_s)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        proc = psutil.Process(server.pid)

        def page(first: int) -> tuple[int, float]:
            began = time.monotonic()
            with urllib.request.urlopen(f"{base}/browse/one_group.parquet?n=20&start={first}", timeout=600) as r:
                body = r.read().decode()
            assert f"doc-{first:08d}" in body, body[:300]
            return r.status, time.monotonic() - began

        rss_idle = proc.memory_info().rss
        with RssSampler(proc) as alone:
            _, alone_s = page(0)
        starts = [i * (rows // 8) for i in range(8)]
        with RssSampler(proc) as eight, ThreadPoolExecutor(8) as pool:
            results = list(pool.map(page, starts))
        rss_after = proc.memory_info().rss
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
        time.sleep(0.5)
        threads_idle_open = proc.num_threads()
        time.sleep(idle_timeout_s + 2)
        threads_after_timeout = proc.num_threads()
        for sock in idle:
            sock.close()
        mib = lambda b: round(b / 2**20)  # noqa: E731
        print(
            json.dumps(
                {
                    "parquet_mb": mib(os.path.getsize(path)),
                    "row_groups": 1,
                    "rows": rows,
                    "write_s": round(write_s, 1),
                    "baseline_read_row_group_peak_rss_mib": mib(baseline_peak),
                    "server_rss_idle_mib": mib(rss_idle),
                    "one_page_peak_rss_mib": mib(alone.peak),
                    "one_page_s": round(alone_s, 2),
                    "eight_pages_peak_rss_mib": mib(eight.peak),
                    "eight_pages_max_s": round(max(s for _, s in results), 2),
                    "rss_after_mib": mib(rss_after),
                    "one_page_peak_vs_baseline": round((alone.peak - rss_idle) / baseline_peak, 4),
                    "threads_with_50_idle_connections": threads_idle_open,
                    "threads_after_idle_timeout": threads_after_timeout,
                    "load_average_1m": round(os.getloadavg()[0], 2),
                }
            )
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "parquet":
        parquet_main(int(sys.argv[2]) if len(sys.argv) > 2 else 400)
        return
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
