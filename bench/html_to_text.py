"""Benchmark: the HTML->text stage vs a plain loop over resiliparse on the same pages.

The stage reads gzipped Dolma shards, extracts, and writes gzipped shards + quarantine (through
``marin_assets.curation.io``: ISA-L gzip, orjson); the plain loop only calls
``extract_plain_text`` on strings already in memory. Goal: stage >= 0.9x the loop (in-process,
one core), plus the stage on Ray (all cores) for reference. The I/O alone (read + parse, encode +
compress of the same shards) is timed too, to show what is left of the gap.

Loop and stage run ``--repeat`` times, interleaved, and the best wall time of each is compared
(robust on a shared, busy machine); the CPU-time ratio (``time.process_time``, all threads of the
process) is printed too.

Usage: ``.venv/bin/python -m bench.html_to_text [--docs 10000] [--repeat 3] [--ray]``
(run it from a checkout whose curation stages are idle: it imports them as they are now).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from marin_assets.curation.html_to_text import HtmlToTextConfig, extract_text, run_html_to_text
from marin_assets.curation.io import encode_jsonl, list_files, read_jsonl
from marin_assets.curation.raw import RawConfig, run_raw
from marin_assets.curation.sample_data import SampleConfig, write_drop
from marin_assets.curation.shard_stage import ShardPool, shard_pool


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of loop and stage (best is kept)")
    parser.add_argument("--ray", action="store_true", help="also time the stage with use_ray=True")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-html-")
    write_drop(work, "drop-001", SampleConfig(docs_per_drop=args.docs, files_per_drop=8), "bench")
    run_raw(RawConfig(f"{work}/landing/bench", "drop-001", f"{work}/raw", docs_per_shard=1000))
    shards = list_files(f"{work}/raw/docs", ".jsonl.gz")
    pages = [r["text"] for f in shards for r in read_jsonl(f)]
    mb = sum(len(p) for p in pages) / 1e6
    print(f"{len(pages)} pages, {mb:.1f} MB of HTML")

    loop_s = loop_cpu = stage_s = stage_cpu = io_cpu = float("inf")
    for i in range(max(1, args.repeat)):
        t, c = time.perf_counter(), time.process_time()
        texts = [extract_text(page) for page in pages]
        loop_s, loop_cpu = min(loop_s, time.perf_counter() - t), min(loop_cpu, time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        with shard_pool(ShardPool(backend="local", workers=1)):
            meta = run_html_to_text(HtmlToTextConfig(f"{work}/raw", f"{work}/text-{i}"))
        stage_s, stage_cpu = min(stage_s, time.perf_counter() - t), min(stage_cpu, time.process_time() - c)
        # The stage's shard I/O alone: read + parse its input, encode + gzip records the size of its output.
        c = time.process_time()
        records = [r for shard in shards for r in read_jsonl(shard)]
        encode_jsonl(({**r, "text": text} for r, text in zip(records, texts, strict=True)), "gzip")
        io_cpu = min(io_cpu, time.process_time() - c)
    print(f"plain resiliparse loop : {loop_s:.2f}s  {len(pages) / loop_s:,.0f} pages/s  (cpu {loop_cpu:.2f}s)")
    print(
        f"stage (in-process)     : {stage_s:.2f}s  {len(pages) / stage_s:,.0f} pages/s  (cpu {stage_cpu:.2f}s)  "
        f"ratio {loop_s / stage_s:.2f}x  (cpu ratio {loop_cpu / stage_cpu:.2f}x)"
    )
    print(
        f"of the stage's extra {stage_cpu - loop_cpu:.2f} cpu-s: shard I/O (read+parse, encode+gzip) {io_cpu:.2f}s, "
        f"the rest ({stage_cpu - loop_cpu - io_cpu:.2f}s) is per-record work in the stage and its base"
    )
    phases = {k: v for k, v in meta.items() if "second" in k}
    print(f"stage metadata timings (last run): {phases}")

    if args.ray:
        import ray

        from marin_resources.ray_cluster import ensure_ray

        ensure_ray()
        with shard_pool(ShardPool(backend="ray")):
            run_html_to_text(HtmlToTextConfig(f"{work}/raw", f"{work}/text-warm"))  # warm workers
            t = time.perf_counter()
            run_html_to_text(HtmlToTextConfig(f"{work}/raw", f"{work}/text-ray"))
            ray_s = time.perf_counter() - t
        print(
            f"stage (Ray, {int(ray.cluster_resources().get('CPU', 0))} CPUs): {ray_s:.2f}s  "
            f"{len(pages) / ray_s:,.0f} pages/s  ratio {loop_s / ray_s:.2f}x"
        )


if __name__ == "__main__":
    main()
