"""Landing-sensor tick cost against the number of drops, on a local folder and on gs:// (the tests'
GCS emulator, fake-gcs-server on 127.0.0.1, filesystem backend).

For each size (default 100 / 1,000 / 10,000 drops of one small file each) and backend, prints:

* ``first_tick_s``: a freshly enabled sensor on a zone whose drops' units already succeeded (the
  Dagster instance holds their materializations): it marks them processed without reading them;
* ``unrun_*`` (sizes up to ``--unrun_max``): a fresh sensor on drops nothing ran yet -- every drop
  read and its checksums verified once, at most ~200 a tick: the number of ticks, the longest, the
  cost per drop;
* ``steady_tick_s``: a later tick with no new drop (median of ``--rounds``), and per drop;
  ``listing_s``: the one listing such a tick makes, timed alone (the storage's share);
* ``new_drops_tick_s``: a tick that finds ``--new`` new drops, and per new drop;
* ``status_first_s`` / ``status_steady_s``: the ``landing_status`` sensor's drop table (first tick
  reads each processed drop's manifest once; a steady tick only lists);
* ``cursor_bytes``: the landing sensor's cursor size.

Goal: steady tick <= 2 s at 10,000 drops on the emulator.

    python -m bench.sensor_scale [--sizes 100,1000,10000] [--backends local,gcs] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable

from marin_assets.dagster_bridge.landing_sensor import evaluate_landing
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.landing.table import zone_rows
from marin_assets.landing.zone import list_drop_folders

SOURCE = "bench-src"


class _QuietLog:
    def debug(self, msg: str) -> None:
        pass

    info = debug

    def warning(self, msg: str) -> None:
        print(f"  warning: {msg}")


def drop_id(i: int) -> str:
    return f"drop-{i:05d}"


def write_drops(prefix: str, first: int, count: int) -> list[str]:
    """``count`` complete drops (one data file + manifest), written in one concurrent batch."""
    fs, _ = filesystem(prefix)
    data_files: dict[str, bytes] = {}
    manifests: dict[str, bytes] = {}
    ids = []
    for i in range(first, first + count):
        drop = drop_id(i)
        ids.append(drop)
        folder = filesystem(join_path(prefix, f"landing/{SOURCE}/{drop}"))[1]
        data = json.dumps({"id": drop, "text": f"document of {drop}"}).encode() + b"\n"
        data_files[f"{folder}/part-00000.jsonl"] = data
        manifest = {
            "drop_id": drop,
            "files": [{"path": "part-00000.jsonl", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
        }
        manifests[f"{folder}/manifest.json"] = json.dumps(manifest).encode()
    if filesystem(prefix)[0].protocol in ("file", ("file", "local")) or "file" in fs.protocol:
        for path in data_files:
            os.makedirs(os.path.dirname(path), exist_ok=True)
    for batch in (data_files, manifests):  # manifests last: a drop is complete once its manifest exists
        items = list(batch.items())
        for start in range(0, len(items), 2000):
            fs.pipe(dict(items[start : start + 2000]))
    return ids


def _timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def measure(prefix: str, size: int, rounds: int, new: int, unrun_max: int) -> dict[str, object]:
    """The figures of one zone of ``size`` drops under ``prefix``."""
    start = time.perf_counter()
    ids = write_drops(prefix, 1, size)
    log = _QuietLog()
    out: dict[str, object] = {"drops": size, "setup_s": round(time.perf_counter() - start, 1)}
    if size <= unrun_max:
        ticks, found_total, unrun_cursor = [], 0, None
        while found_total < size:  # bounded ticks: the zone is verified over a few of them
            seconds, (found, unrun_cursor, _) = _timed(
                lambda c=unrun_cursor: evaluate_landing(prefix, SOURCE, c, lambda k: False, log)
            )
            assert found, "a tick verified nothing"
            ticks.append(seconds)
            found_total += len(found)
        out["unrun_ticks"] = len(ticks)
        out["unrun_longest_tick_s"] = round(max(ticks), 3)
        out["unrun_per_drop_ms"] = round(1000 * sum(ticks) / size, 3)
    succeeded = set(ids)
    seconds, (found, cursor, _) = _timed(
        lambda: evaluate_landing(prefix, SOURCE, None, lambda k: True, log, already_processed=lambda: succeeded)
    )
    assert not found, found[:3]
    out["first_tick_s"] = round(seconds, 3)
    steady = []
    for _ in range(rounds):
        seconds, (found, cursor, _) = _timed(lambda c=cursor: evaluate_landing(prefix, SOURCE, c, lambda k: True, log))
        assert not found
        steady.append(seconds)
    out["steady_tick_s"] = round(statistics.median(steady), 3)
    # The one listing a steady tick makes, alone: what the storage costs, the rest is ours.
    folder = join_path(prefix, f"landing/{SOURCE}")
    out["listing_s"] = round(statistics.median(_timed(lambda: list_drop_folders(folder))[0] for _ in range(rounds)), 3)
    out["steady_per_drop_us"] = round(1e6 * statistics.median(steady) / size, 2)
    out["cursor_bytes"] = len(cursor)
    added = write_drops(prefix, size + 1, new)
    seconds, (found, cursor, _) = _timed(lambda: evaluate_landing(prefix, SOURCE, cursor, lambda k: True, log))
    assert [d for d, _, _ in found] == added, found
    out["new_drops_tick_s"] = round(seconds, 3)
    out["per_new_drop_ms"] = round(1000 * seconds / new, 2)
    processed = set(ids) | set(added)
    state: dict[str, object] = {}
    seconds, rows = _timed(lambda: zone_rows(folder, SOURCE, processed, False, state))
    assert all(r["status"] == "processed" for r in rows) and len(rows) == size + new
    out["status_first_s"] = round(seconds, 3)
    status_steady = [_timed(lambda: zone_rows(folder, SOURCE, processed, False, state))[0] for _ in range(rounds)]
    out["status_steady_s"] = round(statistics.median(status_steady), 3)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--backends", default="local,gcs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new", type=int, default=10, help="new drops found by one tick")
    parser.add_argument("--unrun_max", type=int, default=1000, help="largest size timed with nothing run yet")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = []
    with tempfile.TemporaryDirectory(prefix="sensor-scale-") as tmp:
        server = None
        try:
            for backend in args.backends.split(","):
                for size in sizes:
                    if backend == "local":
                        prefix = os.path.join(tmp, f"local-{size}")
                    else:
                        if server is None:
                            from tests.gcs_server import GcsServer, point_fsspec_at

                            # Its filesystem backend: uploads to the in-memory one slow down as the
                            # bucket grows (10,000 drops took longer than the benchmark's budget).
                            server = GcsServer(f"{tmp}/fake-gcs-server.log", f"{tmp}/gcs-objects").start()
                            point_fsspec_at(server)
                        prefix = f"gs://{server.create_bucket()}/marin"
                    figures = {"backend": backend, **measure(prefix, size, args.rounds, args.new, args.unrun_max)}
                    print(json.dumps(figures), flush=True)
                    results.append(figures)
        finally:
            if server is not None:
                server.stop()
    print(json.dumps({"load_average": os.getloadavg(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
