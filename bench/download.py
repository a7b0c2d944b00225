"""Download benchmark: a multi-file dataset from a hub-compatible server on loopback.

The server (``tests/conformance/hub_server.py``) runs in a child process and serves ``--files`` files
of ``--mb`` MB each (random bytes) as one dataset revision. Timed, each into a fresh destination:

* ``snapshot_download`` -- ``huggingface_hub.snapshot_download`` to a local folder (the baseline,
  ``max_workers=--streams``);
* ``download_hf_local`` -- this project's ``download_hf`` into a local prefix (``max_streams=--streams``:
  provenance and sha256 checks included);
* ``download_hf_gcs`` -- the same into ``gs://`` on the tests' GCS API server (fake-gcs-server on
  127.0.0.1), unless ``--no_gcs``.

Prints one JSON object: MB/s of each, ``download_hf_local`` / ``snapshot_download`` as a ratio, and the
load average beside them (the machine is shared: compare ratios, not absolute rates).

    python -m bench.download [--files 8] [--mb 16] [--streams 8] [--rounds 2] [--no_gcs]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time

os.environ["HF_HUB_OFFLINE"] = "0"  # before huggingface_hub is imported: its client reads it once
os.environ["TRANSFORMERS_OFFLINE"] = "0"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPO = "bench-org/bench-data"


def _serve(files: int, mb: int, port_pipe) -> None:
    from tests.conformance.hub_server import HubServer

    server = HubServer()
    server.add_repo(REPO, {f"data/part-{i:04d}.bin": os.urandom(mb << 20) for i in range(files)})
    server.start()
    port_pipe.send(server.port)
    while True:
        time.sleep(3600)


def _rate(total_bytes: int, seconds: float) -> float:
    return round(total_bytes / 1e6 / seconds, 1)


def _best(fn, rounds: int) -> float:
    """The fastest of ``rounds`` runs (seconds); each run gets a fresh destination."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--mb", type=int, default=16)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no_gcs", action="store_true")
    args = parser.parse_args(argv)

    receive, send = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=_serve, args=(args.files, args.mb, send), daemon=True)
    server.start()
    port = receive.recv()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ["HF_ENDPOINT"] = endpoint
    total = args.files * (args.mb << 20)
    work = tempfile.mkdtemp(prefix="bench-download-")
    results: dict[str, object] = {"files": args.files, "mb_each": args.mb, "streams": args.streams}
    gcs = None
    try:
        from huggingface_hub import snapshot_download

        from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf

        counter = iter(range(10**6))

        def baseline() -> None:
            dest = os.path.join(work, f"snapshot-{next(counter)}")
            snapshot_download(
                REPO,
                repo_type="dataset",
                revision="main",
                endpoint=endpoint,
                local_dir=dest,
                cache_dir=os.path.join(work, "hf-cache"),
                max_workers=args.streams,
            )
            shutil.rmtree(dest)

        def ours(prefix: str) -> None:
            dest = f"{prefix}/raw-{next(counter)}"
            download_hf(DownloadConfig(REPO, "main", gcs_output_path=dest, max_streams=args.streams))
            if "://" not in dest:
                shutil.rmtree(dest)

        seconds = {
            "snapshot_download": _best(baseline, args.rounds),
            "download_hf_local": _best(lambda: ours(os.path.join(work, "prefix")), args.rounds),
        }
        if not args.no_gcs:
            from tests.gcs_server import GcsServer, point_fsspec_at

            gcs = GcsServer(os.path.join(work, "fake-gcs-server.log")).start()
            point_fsspec_at(gcs)
            bucket = gcs.create_bucket()
            seconds["download_hf_gcs"] = _best(lambda: ours(f"gs://{bucket}/marin"), args.rounds)
        results["mb_per_s"] = {name: _rate(total, s) for name, s in seconds.items()}
        results["ratio_local_vs_snapshot_download"] = round(
            seconds["snapshot_download"] / seconds["download_hf_local"], 2
        )
        if "download_hf_gcs" in seconds:
            results["ratio_gcs_vs_snapshot_download"] = round(
                seconds["snapshot_download"] / seconds["download_hf_gcs"], 2
            )
        results["load_1min"] = round(os.getloadavg()[0], 1)
        results["cpus"] = os.cpu_count()
    finally:
        if gcs is not None:
            gcs.stop()
        server.terminate()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
