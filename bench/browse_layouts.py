"""Benchmark: the data browser's peak memory per parquet layout, 1 and 8 requests at once, limit off / on.

Three files of about ``--mib`` MiB (default 128) are written to a temp dir:

* ``one_page``: one row group whose text column is ONE data page (``data_page_size`` above the file);
* ``one_cell``: a few normal rows and one row whose text is a single cell of the whole size;
* ``row_groups``: ``--groups`` (default 50,000) row groups of one row each (a large footer).

Each file is served by a fresh ``BrowserApp`` in a child process, which reports its peak RSS
(``VmHWM``) after serving the first record page: once, or 8 times at once in another child (threads;
the app's default of 4 heavy pages at a time, the others wait). Every case runs twice in the same
bench: with the read limit off (``--max_read_mib`` huge: what the browser did before, the baseline)
and on (the default, 32 MiB); the ratio on / off is printed. A child whose page says "Preview
truncated" reports it.

Usage: ``.venv/bin/python -m bench.browse_layouts [--mib 128] [--groups 50000]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading

from bench.reader_memory import peak_rss_mib

OFF = 1 << 50  # a read limit nothing reaches: the browser without the bound


def write_files(root: str, mib: int, groups: int) -> dict[str, str]:
    """The three layouts under ``root``; name -> path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    size = mib << 20
    rows = 4096
    text = ["x" * (size // rows) + f" row-{i}" for i in range(rows)]
    paths = {name: os.path.join(root, f"{name}.parquet") for name in ("one_page", "one_cell", "row_groups")}
    table = pa.table({"id": [f"row-{i}" for i in range(rows)], "text": text})
    pq.write_table(table, paths["one_page"], row_group_size=rows, data_page_size=size * 2, compression="none")
    del table, text
    cell = ["a short record"] * 8 + ["y" * size]
    pq.write_table(pa.table({"id": [f"c-{i}" for i in range(9)], "text": cell}), paths["one_cell"], compression="none")
    del cell
    many = pa.table({"id": [f"g-{i}" for i in range(groups)], "text": [f"text {i}" for i in range(groups)]})
    pq.write_table(many, paths["row_groups"], row_group_size=1)
    return paths


def child(path: str, limit: int, at_once: int) -> None:
    """Serve the first record page of ``path`` ``at_once`` times concurrently; print a JSON line."""
    from marin_assets.browse.server import BrowserApp

    app = BrowserApp(os.path.dirname(path), max_read_bytes=limit)
    target = f"/browse/{os.path.basename(path)}?n=20"
    results: list[tuple[int, bool]] = []

    def one() -> None:
        response = app.get(target)
        results.append((response.status, "Preview truncated" in response.body))

    threads = [threading.Thread(target=one) for _ in range(at_once)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = peak_rss_mib()
    print(
        json.dumps(
            {"peak_mib": peak, "statuses": sorted(s for s, _ in results), "truncated": any(t for _, t in results)}
        )
    )


def _run(path: str, limit: int, at_once: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "bench.browse_layouts", "--child", path, str(limit), str(at_once)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        return {"peak_mib": float("nan"), "statuses": [f"exit {done.returncode}"], "truncated": False}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print one line per layout and concurrency: peak RSS with the limit off and on, and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=128)
    parser.add_argument("--groups", type=int, default=50_000)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    from marin_assets.browse.parquet_pages import MAX_READ_BYTES

    with tempfile.TemporaryDirectory(prefix="browse-layouts-") as tmp:
        paths = write_files(tmp, args.mib, args.groups)
        sizes = {name: os.path.getsize(path) / 2**20 for name, path in paths.items()}
        print(f"layouts of ~{args.mib} MiB, read limit {MAX_READ_BYTES >> 20} MiB (load {os.getloadavg()[0]:.1f})")
        for name, path in paths.items():
            for at_once in (1, 8):
                off = _run(path, OFF, at_once)
                on = _run(path, MAX_READ_BYTES, at_once)
                print(
                    f"{name:10s} ({sizes[name]:6.1f} MiB file) x{at_once}: peak RSS limit off {off['peak_mib']:7.0f} MiB "
                    f"{off['statuses']}, on {on['peak_mib']:6.0f} MiB {on['statuses']} "
                    f"truncated={on['truncated']}; on/off {on['peak_mib'] / off['peak_mib']:.2f}"
                )


if __name__ == "__main__":
    main()
