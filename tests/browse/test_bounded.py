"""The browser's memory and threads are bounded whatever a client or a file does: a huge JSON line
is skipped unread, a one-row-group parquet file is read a page at a time, heavy pages are capped,
and a connection that sends nothing is closed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

from marin_assets.browse import shards
from marin_assets.browse.server import BrowserApp, make_handler

REPO = Path(__file__).resolve().parents[2]


def test_a_line_over_the_cap_is_shown_as_an_error_record_and_the_next_records_follow(tmp_path):
    shard = tmp_path / "big.jsonl"
    huge = json.dumps({"id": "huge", "text": "x" * (shards.MAX_LINE_BYTES + (1 << 20))})
    shard.write_text("\n".join([json.dumps({"id": "a"}), huge, json.dumps({"id": "b"})]) + "\n")
    page = shards.ShardPager().page(str(shard), 0, 10)
    assert [r.get("id") for _, r in page.records] == ["a", None, "b"]
    assert "over" in page.records[1][1]["_error"] and page.at_end
    # A page that starts after it resumes exactly (the offset counted the skipped bytes).
    assert [r.get("id") for _, r in shards.ShardPager().page(str(shard), 2, 10).records] == ["b"]


_PARQUET_PEAK = """
import sys, pyarrow as pa
from marin_assets.browse.server import BrowserApp
app = BrowserApp(sys.argv[1])
before = pa.default_memory_pool().max_memory()
response = app.get("/browse/one_group.parquet?n=20&start=" + sys.argv[2])
assert response.status == 200 and "row-" + sys.argv[2] in response.body, response.body[:2000]
print(pa.default_memory_pool().max_memory() - before)
"""


def test_a_page_of_a_one_row_group_parquet_file_reads_a_page_not_the_row_group(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # pyarrow's default layout: data pages of at most 1 MiB or 1024 rows -- what a page read decodes.
    rows = 20000
    text = [f"row-{i} " + ("abcdefghij" * 200) for i in range(rows)]  # ~2 KB a row, 40 MB in all
    pq.write_table(
        pa.table({"id": [f"row-{i}" for i in range(rows)], "text": text}),
        tmp_path / "one_group.parquet",
        row_group_size=rows,
        compression="none",
    )
    assert pq.ParquetFile(tmp_path / "one_group.parquet").metadata.num_row_groups == 1
    for start in ("0", "15000"):
        done = subprocess.run(
            [sys.executable, "-c", _PARQUET_PEAK, str(tmp_path), start],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        peak = int(done.stdout.strip().splitlines()[-1])
        assert peak < 8 << 20, f"Arrow peak {peak >> 20} MiB for a page of a 40 MB row group (start {start})"


def test_heavy_pages_beyond_the_cap_get_503_with_retry_after(tmp_path):
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a"}) + "\n")
    app = BrowserApp(str(tmp_path), max_heavy=1, heavy_wait_s=0.1)
    assert app.get("/browse/s.jsonl").status == 200
    assert app.heavy.acquire(timeout=1)  # another record page is being served
    try:
        busy = app.get("/browse/s.jsonl")
        assert busy.status == 503 and busy.headers["Retry-After"]
        assert app.get("/browse/").status == 200  # a folder page is light: never capped
    finally:
        app.heavy.release()
    assert app.get("/browse/s.jsonl").status == 200


def test_a_silent_connection_is_closed_and_its_thread_ends(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(BrowserApp(str(tmp_path), idle_timeout_s=0.5)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        before = threading.active_count()
        idle = [socket.create_connection(server.server_address[:2]) for _ in range(10)]
        half = socket.create_connection(server.server_address[:2])
        half.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # half a request, then nothing
        deadline = time.monotonic() + 10
        for sock in [*idle, half]:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            assert sock.recv(1024) == b""  # closed by the server (a timeout here fails the test)
            sock.close()
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before
    finally:
        server.shutdown()
        server.server_close()
