"""A WARC drop through raw -> text -> quality -> dedup -> consolidated: docs/s per stage, peak RSS.

Usage (from the repository root)::

    .venv/bin/python -m bench.curation_pipeline --pages 20000 [--files 4] [--ray-workers 1,2]
    .venv/bin/python -m bench.curation_pipeline --pages 2000 --incremental 10   # cost of drop N+1

1. Writes one sample drop of ``--pages`` HTML pages as ``--files`` ``.warc.gz`` files with the
   FastWARC writer (streamed: the generator holds one page at a time). Generation is timed apart.
2. Trains a small fastText model on 2,000 pages' text (setup, not timed).
3. **Local**: each stage runs in its own child process (``--run-stage``), shards in that process
   (one core): wall time, docs/s and the child's peak RSS (``ru_maxrss`` of the child tree).
4. **Ray** (``--ray-workers 1,2``): a private Ray with that many CPUs; the stages run with
   ``shard_pool(ShardPool("ray"))``; peak RSS is the largest sum over the driver and every process
   of the Ray session, sampled every 0.2 s. Speed-up is printed against the first worker count of
   the same run; ``--repeat N`` runs the worker counts N times interleaved and keeps the best.
5. ``--incremental N``: N drops of ``--pages`` pages each, then drop k's dedup for k = 1..N: wall
   time and the part spent loading the earlier drops' indices (``earlier_index_seconds``).

On a shared 2-core machine timings are noisy; compare ratios printed by one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

STAGES = ("raw", "text", "quality", "dedup", "consolidated")
SOURCE = "bench-warc"


def write_warc_drop(prefix: str, drop_id: str, pages: int, files: int) -> dict[str, Any]:
    """A drop of ``pages`` sample pages in ``files`` .warc.gz files (+ manifest, written last)."""
    import hashlib

    from marin_assets.curation.sample_data import SampleConfig, iter_pages, truth_created
    from marin_assets.curation.warc_writer import WarcPage, write_warc_gz

    drop_dir = os.path.join(prefix, "landing", SOURCE, drop_id)
    os.makedirs(drop_dir, exist_ok=True)
    per_file = -(-pages // files)
    date = truth_created(drop_id)
    stream = iter_pages(drop_id, SampleConfig(docs_per_drop=pages))
    entries = []
    for i in range(files):
        name = f"part-{i:05d}.warc.gz"
        path = os.path.join(drop_dir, name)
        chunk = (WarcPage(p.id, p.url, date, p.html) for _, p in zip(range(per_file), stream, strict=False))
        with open(path, "wb") as handle:
            write_warc_gz(handle, chunk, name)
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda h=handle: h.read(1 << 20), b""):
                digest.update(block)
        entries.append({"path": name, "bytes": os.path.getsize(path), "sha256": digest.hexdigest()})
    manifest = {"drop_id": drop_id, "source": SOURCE, "created_at": date, "files": entries}
    with open(os.path.join(drop_dir, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    return manifest


def train_model(work: str, text_path: str) -> str:
    """A fastText model on up to 2,000 texts of the drop (labels from the sample generator's kinds)."""
    import fasttext

    from marin_assets.curation.io import list_files, read_jsonl_gz
    from marin_assets.curation.quality import MODEL_FILE, fasttext_line

    lines = []
    for shard in list_files(os.path.join(text_path, "docs"), ".jsonl.gz"):
        for rec in read_jsonl_gz(shard):
            spam = sum(w.isupper() for w in rec["text"].split()) > 20 or rec["text"].count("!!") > 2
            lines.append(f"__label__{'lq' if spam else 'hq'} {fasttext_line(rec['text'])}")
            if len(lines) >= 2000:
                break
        if len(lines) >= 2000:
            break
    model_dir = os.path.join(work, "model")
    os.makedirs(model_dir, exist_ok=True)
    train_file = os.path.join(work, "train.txt")
    with open(train_file, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    model = fasttext.train_supervised(input=train_file, epoch=5, dim=20, bucket=100_000, thread=16, verbose=0)
    model.save_model(os.path.join(model_dir, MODEL_FILE))
    return model_dir


def stage_paths(work: str, drop_id: str) -> dict[str, str]:
    return {s: os.path.join(work, s, drop_id) for s in STAGES}


def run_stage(stage: str, work: str, drop_id: str) -> dict[str, Any]:
    """Run one stage of ``drop_id`` (outputs under ``work/<stage>/<drop>``); returns its metadata."""
    from marin_assets.curation.consolidate import ConsolidateConfig, run_consolidate
    from marin_assets.curation.dedup import DedupConfig, run_dedup
    from marin_assets.curation.html_to_text import HtmlToTextConfig, run_html_to_text
    from marin_assets.curation.quality import QualityAttributesConfig, run_quality_attributes
    from marin_assets.curation.raw import RawConfig, run_raw

    p = stage_paths(work, drop_id)
    if stage == "raw":
        landing = os.path.join(work, "landing", SOURCE)
        return run_raw(RawConfig(landing_dir=landing, drop_id=drop_id, output_path=p["raw"]))
    if stage == "text":
        return run_html_to_text(HtmlToTextConfig(p["raw"], p["text"]))
    if stage == "quality":
        model = os.path.join(work, "model")
        return run_quality_attributes(QualityAttributesConfig(p["text"], model, p["quality"]))
    if stage == "dedup":
        return run_dedup(DedupConfig(p["text"], p["dedup"], drop_id))
    return run_consolidate(ConsolidateConfig(p["text"], p["quality"], p["dedup"], p["consolidated"]))


def _rate(meta: dict[str, Any], seconds: float) -> tuple[int, float]:
    docs = int(meta.get("records_in") or meta.get("documents_in") or 0)
    return docs, docs / seconds if seconds else 0.0


def run_local(work: str, drop_id: str) -> list[dict[str, Any]]:
    """Each stage in a fresh child process: wall, docs/s, peak RSS of that child (``wait4``)."""
    rows = []
    for stage in STAGES:
        with tempfile.TemporaryFile("w+") as out:
            start = time.monotonic()
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.curation_pipeline",
                    "--run-stage",
                    stage,
                    "--work",
                    work,
                    "--drop",
                    drop_id,
                ],
                stdout=out,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.monotonic() - start
            if proc.returncode:
                raise RuntimeError(f"stage {stage} exited with {proc.returncode}")
            out.seek(0)
            meta = json.loads(out.read().strip().splitlines()[-1])
        docs, rate = _rate(meta, meta["seconds"])
        rows.append(
            {
                "stage": stage,
                "docs": docs,
                "stage_s": meta["seconds"],
                "docs_per_s": round(rate, 1),
                "process_wall_s": round(wall, 2),
                "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
            }
        )
    return rows


class _RssSampler(threading.Thread):
    """Peak of (driver RSS + RSS of every process whose command line names ``marker``)."""

    def __init__(self, marker: str) -> None:
        super().__init__(daemon=True)
        self.marker, self.peak, self.stop = marker, 0, threading.Event()

    def run(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.is_set():
            total = me.memory_info().rss
            for proc in psutil.process_iter(["cmdline", "memory_info"]):
                try:
                    if proc.pid != me.pid and any(self.marker in part for part in proc.info["cmdline"] or []):
                        total += proc.info["memory_info"].rss
                except (psutil.Error, TypeError):
                    continue
            self.peak = max(self.peak, total)
            time.sleep(0.2)


def run_ray(work: str, drop_id: str, workers: int) -> list[dict[str, Any]]:
    """The stages on a private Ray with ``workers`` CPUs (shard tasks on Ray)."""
    import ray

    from marin_assets.curation.shard_stage import ShardPool, shard_pool

    temp = tempfile.mkdtemp(prefix="bcp-", dir="/tmp")
    ray.init(num_cpus=workers, include_dashboard=False, _temp_dir=temp, log_to_driver=False)
    try:
        ray.get([ray.remote(lambda: 0).remote() for _ in range(workers)])  # warm the workers
        rows = []
        for stage in STAGES:
            sampler = _RssSampler(temp)
            sampler.start()
            with shard_pool(ShardPool("ray")):
                meta = run_stage(stage, work, drop_id)
            sampler.stop.set()
            sampler.join()
            docs, rate = _rate(meta, meta["seconds"])
            rows.append(
                {
                    "stage": stage,
                    "docs": docs,
                    "stage_s": meta["seconds"],
                    "docs_per_s": round(rate, 1),
                    "peak_rss_mib": round(sampler.peak / 2**20, 1),
                }
            )
        return rows
    finally:
        ray.shutdown()


def run_incremental(work: str, drops: int, pages: int, files: int) -> list[dict[str, Any]]:
    """Cost of drop N+1 after N drops: raw/text in process, then dedup in drop order."""
    rows = []
    for n in range(1, drops + 1):
        drop_id = f"drop-{n:03d}"
        write_warc_drop(work, drop_id, pages, files)
        for stage in ("raw", "text"):
            run_stage(stage, work, drop_id)
        start = time.monotonic()
        meta = run_stage("dedup", work, drop_id)
        rows.append(
            {
                "drop": n,
                "earlier_documents": meta["earlier_index_documents"],
                "dedup_s": round(time.monotonic() - start, 3),
                "index_load_s": meta["earlier_index_seconds"],
                "cross_drop_duplicates": meta["fuzzy_duplicates_of_earlier_drops"],
            }
        )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000, help="pages in the drop (200k+ is ~1 GB of WARC)")
    parser.add_argument("--files", type=int, default=4, help=".warc.gz files in the drop")
    parser.add_argument("--ray-workers", default="", help="comma-separated Ray CPU counts, e.g. 1,2")
    parser.add_argument("--repeat", type=int, default=1, help="Ray runs per worker count (interleaved, best kept)")
    parser.add_argument("--incremental", type=int, default=0, help="N drops: cost of drop N+1 (dedup)")
    parser.add_argument("--work", default="", help="work folder (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--run-stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--drop", default="drop-001", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_stage:
        print(json.dumps(run_stage(args.run_stage, args.work, args.drop), default=str))
        return
    work = args.work or tempfile.mkdtemp(prefix="bench-curation-")
    try:
        if args.incremental:
            rows = run_incremental(work, args.incremental, args.pages, args.files)
            print(f"cost of drop N+1 ({args.pages} pages per drop):\n{_table(rows)}")
            return
        start = time.monotonic()
        manifest = write_warc_drop(work, "drop-001", args.pages, args.files)
        size = sum(f["bytes"] for f in manifest["files"])
        print(
            f"drop: {args.pages} pages, {size / 2**20:.1f} MiB of .warc.gz in {args.files} files "
            f"(generated in {time.monotonic() - start:.1f} s, not counted)"
        )
        run_stage("raw", work, "drop-001")
        run_stage("text", work, "drop-001")
        train_model(work, stage_paths(work, "drop-001")["text"])
        local = run_local(work, "drop-001")
        print(f"\nlocal, one process per stage, shards in process (1 core):\n{_table(local)}")
        base: dict[str, float] = {}
        counts = [int(w) for w in args.ray_workers.split(",") if w]
        best: dict[int, list[dict[str, Any]]] = {}
        for _ in range(max(1, args.repeat)):  # interleaved, best docs/s per stage kept (noisy machine)
            for workers in counts:
                rows = run_ray(work, "drop-001", workers)
                kept = best.setdefault(workers, rows)
                for i, row in enumerate(rows):
                    if row["docs_per_s"] > kept[i]["docs_per_s"]:
                        kept[i] = row
        for workers in counts:
            rows = best[workers]
            for row in rows:
                base.setdefault(row["stage"], row["docs_per_s"])
                row["speedup_vs_first"] = round(row["docs_per_s"] / base[row["stage"]], 2) if base[row["stage"]] else 0
            print(f"\nRay, {workers} worker CPU(s) (peak RSS: driver + every Ray process):\n{_table(rows)}")
    finally:
        if not args.keep and not args.work:
            import shutil

            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
