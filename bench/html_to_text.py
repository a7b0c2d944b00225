"""Benchmark: the HTML->text stage vs a plain loop over resiliparse on the same pages.

* **Baseline (the plain loop)**: ``convert_page(page, None, "resiliparse", CURATION_EXTRACTION)`` -- the
  stage's own function with the pipeline's arguments -- over the ``text`` of every record of the
  same input shards, held in memory as ``str`` beforehand: no file reading, no JSON, no writing.
* **Bare resiliparse loop**: ``extract_plain_text(page, **CURATION_EXTRACTION.resiliparse_kwargs)``
  over the same strings -- what the stage calls per page since it resolves its extractor once
  (``web.convert.text_extractor``: same text, no title lookup); the stricter baseline.
* **Stage**: ``html_to_md`` in process, one worker: reads the gzipped Dolma shards (ISA-L
  gzip, msgspec), extracts, writes gzipped shards + quarantine (orjson, ISA-L, fsync + rename).

Goal: stage >= 0.9x the loop. The stage's extra CPU is split into the shard I/O alone (read +
decode the same shards; encode + compress + write records the size of its output) and the rest
(per-record work of the stage and its base).

Loop and stage run ``--repeat`` times, interleaved, and the best wall time of each is compared
(robust on a shared, busy machine); every run's ratio is printed too, with the CPU-time ratio
(``time.process_time``, all threads of the process), the page faults of each (``ru_minflt``: a count
that does not depend on the machine's load) and the load average.

Usage: ``.venv/bin/python -m bench.html_to_text [--docs 10000] [--repeat 5] [--workers N] [--ray]``
(run it from a checkout whose curation stages are idle: it imports them as they are now).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

from resiliparse.extract.html2text import extract_plain_text

from marin_assets.core.io import JsonlShardWriter, iter_records, list_files, read_jsonl
from marin_assets.core.shard_stage import ShardPool, shard_pool
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin_assets.web.convert import convert_page


def _shard_io_cpu(shards: list[str], texts: list[str], out_dir: str) -> tuple[float, float]:
    """CPU seconds of the stage's shard I/O alone: (read + decode, encode + compress + write)."""
    c = time.process_time()
    per_shard = [[record for _, record in iter_records(shard)] for shard in shards]
    read_cpu = time.process_time() - c
    c = time.process_time()
    texts_left = iter(texts)
    for shard, records in zip(shards, per_shard, strict=True):
        with JsonlShardWriter(f"{out_dir}/{os.path.basename(shard)}") as writer:
            for record in records:
                writer.write({**record, "text": next(texts_left)})
    return read_cpu, time.process_time() - c


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved runs of loop and stage (best is kept)")
    parser.add_argument("--ray", action="store_true", help="also time the stage with its shards as Ray tasks")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="also time the stage on N local shard processes"
    )
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-html-")
    write_drop(work, "drop-001", SampleConfig(docs_per_drop=args.docs, files_per_drop=8), "bench")
    run_raw(RawConfig(f"{work}/landing/bench", "drop-001", f"{work}/raw", docs_per_shard=1000))
    shards = list_files(f"{work}/raw/docs", ".jsonl.gz")
    pages = [r["text"] for f in shards for r in read_jsonl(f)]
    mb = sum(len(p) for p in pages) / 1e6
    print(f"{len(pages)} pages, {mb:.1f} MB of HTML in {len(shards)} shards; load average {os.getloadavg()}")

    kwargs = CURATION_EXTRACTION.resiliparse_kwargs
    loop_s = loop_cpu = bare_s = bare_cpu = stage_s = stage_cpu = read_cpu = write_cpu = float("inf")
    for i in range(max(1, args.repeat)):
        t, c = time.perf_counter(), time.process_time()
        texts = [convert_page(page, None, "resiliparse", CURATION_EXTRACTION)["content"].strip() for page in pages]
        run_loop_s, run_loop_cpu = time.perf_counter() - t, time.process_time() - c
        t, c, f = time.perf_counter(), time.process_time(), _faults()
        bare = [extract_plain_text(page, **kwargs).strip() for page in pages]
        run_bare_s, run_bare_cpu, bare_faults = time.perf_counter() - t, time.process_time() - c, _faults() - f
        assert bare == texts, "the bare loop must give the stage's text"
        t, c, f = time.perf_counter(), time.process_time(), _faults()
        with shard_pool(ShardPool(backend="local", workers=1)):
            meta = html_to_md(
                SimpleHtmlToMdConfig(f"{work}/raw", f"{work}/text-{i}", "resiliparse", CURATION_EXTRACTION)
            )
        run_stage_s, run_stage_cpu, stage_faults = time.perf_counter() - t, time.process_time() - c, _faults() - f
        print(
            f"  run {i + 1}: loop {run_loop_s:.2f}s, bare {run_bare_s:.2f}s, stage {run_stage_s:.2f}s, ratio "
            f"{run_loop_s / run_stage_s:.2f}x (cpu {run_loop_cpu / run_stage_cpu:.2f}x; vs bare "
            f"{run_bare_s / run_stage_s:.2f}x, cpu {run_bare_cpu / run_stage_cpu:.2f}x), page faults bare "
            f"{bare_faults} stage {stage_faults}, load {os.getloadavg()[0]:.1f}"
        )
        loop_s, loop_cpu = min(loop_s, run_loop_s), min(loop_cpu, run_loop_cpu)
        bare_s, bare_cpu = min(bare_s, run_bare_s), min(bare_cpu, run_bare_cpu)
        stage_s, stage_cpu = min(stage_s, run_stage_s), min(stage_cpu, run_stage_cpu)
        os.makedirs(f"{work}/io-{i}")
        run_read, run_write = _shard_io_cpu(shards, texts, f"{work}/io-{i}")
        read_cpu, write_cpu = min(read_cpu, run_read), min(write_cpu, run_write)
    print(f"plain resiliparse loop : {loop_s:.2f}s  {len(pages) / loop_s:,.0f} pages/s  (cpu {loop_cpu:.2f}s)")
    print(f"bare extract_plain_text: {bare_s:.2f}s  {len(pages) / bare_s:,.0f} pages/s  (cpu {bare_cpu:.2f}s)")
    print(
        f"stage (in-process)     : {stage_s:.2f}s  {len(pages) / stage_s:,.0f} pages/s  (cpu {stage_cpu:.2f}s)  "
        f"ratio {loop_s / stage_s:.2f}x  (cpu ratio {loop_cpu / stage_cpu:.2f}x); vs the bare loop "
        f"{bare_s / stage_s:.2f}x (cpu {bare_cpu / stage_cpu:.2f}x)"
    )
    extra = stage_cpu - bare_cpu
    print(
        f"of the stage's extra {extra:.2f} cpu-s over the bare loop: read + decode {read_cpu:.2f}s, encode + compress + write "
        f"{write_cpu:.2f}s, the rest ({extra - read_cpu - write_cpu:.2f}s) is per-record work in the stage and its base"
    )
    phases = {k: v for k, v in meta.items() if "second" in k}
    print(f"stage metadata timings (last run): {phases}")

    if args.workers > 1:
        # The stage as a user can run it on this machine (MARIN_LOCAL_SHARD_WORKERS=N): shards on
        # N spawned processes. The plain loop has no such knob: resiliparse runs on one core.
        best = float("inf")
        for i in range(max(1, args.repeat)):
            t = time.perf_counter()
            with shard_pool(ShardPool(backend="local", workers=args.workers)):
                html_to_md(
                    SimpleHtmlToMdConfig(f"{work}/raw", f"{work}/text-pool-{i}", "resiliparse", CURATION_EXTRACTION)
                )
            best = min(best, time.perf_counter() - t)
        print(
            f"stage ({args.workers} local processes): {best:.2f}s  {len(pages) / best:,.0f} pages/s  "
            f"ratio {loop_s / best:.2f}x the one-core loop"
        )

    if args.ray:
        import ray

        from marin_resources.ray_connect import ensure_ray

        ensure_ray()
        with shard_pool(ShardPool(backend="ray")):
            html_to_md(
                SimpleHtmlToMdConfig(f"{work}/raw", f"{work}/text-warm", "resiliparse", CURATION_EXTRACTION)
            )  # warm workers
            t = time.perf_counter()
            html_to_md(SimpleHtmlToMdConfig(f"{work}/raw", f"{work}/text-ray", "resiliparse", CURATION_EXTRACTION))
            ray_s = time.perf_counter() - t
        print(
            f"stage (Ray, {int(ray.cluster_resources().get('CPU', 0))} CPUs): {ray_s:.2f}s  "
            f"{len(pages) / ray_s:,.0f} pages/s  ratio {loop_s / ray_s:.2f}x"
        )


if __name__ == "__main__":
    main()
