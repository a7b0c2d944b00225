"""Benchmark: our fuzzy dedup stage vs datatrove's MinHash pipeline on the same documents.

Both run single-process at equal parameters (5-grams, 14 bands x 8 rows = 112 hashes) on the
text of one sample drop of ``--docs`` documents (default 20k). Printed: docs/s of each and the
ratio, and recall/precision on the planted exact + near duplicates (a planted pair counts as found
when the copy or its original is removed; a removed document outside every planted pair is a
false positive).

Each side's CPU seconds are printed beside its wall time, and the ratio of both: on a shared, busy
machine the wall ratio depends on how busy it was during each run (datatrove's run is long), the
CPU ratio much less. Ours runs ``--repeat`` times (best kept); datatrove once. The load average is
printed at the start and after each side.

datatrove conflicts with this project's pins (it upgrades huggingface_hub), so it runs in its own
virtualenv: ``python3 -m venv /tmp/venv-datatrove && /tmp/venv-datatrove/bin/pip install datatrove
regex xxhash tokenizers orjson spacy`` (its readers need orjson; its English word tokenizer is spaCy's).

Usage: ``.venv/bin/python -m bench.dedup [--docs 20000] [--repeat 3] [--datatrove-python /tmp/venv-datatrove/bin/python]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time

from marin_assets.core.io import list_files, read_jsonl_gz
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.experiments.sample_data import SampleConfig, ground_truth_path, write_drop
from marin_assets.processing.classification.dedupe import DedupeConfig, dedupe
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md

DATATROVE_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
        MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    src, work, ngram, bands, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    cfg = MinhashConfig(n_grams=ngram, num_buckets=bands, hashes_per_bucket=rows, hash_config=HashConfig(precision=64, hash_fc="sha1"))
    start = time.time()
    stages = [
        [JsonlReader(src, glob_pattern="*.jsonl.gz"), MinhashDedupSignature(output_folder=f"{work}/sigs", config=cfg)],
        [MinhashDedupBuckets(input_folder=f"{work}/sigs", output_folder=f"{work}/buckets", config=cfg)],
        [MinhashDedupCluster(input_folder=f"{work}/buckets", output_folder=f"{work}/remove_ids", config=cfg)],
        [JsonlReader(src, glob_pattern="*.jsonl.gz"),
         MinhashDedupFilter(input_folder=f"{work}/remove_ids",
                            exclusion_writer=JsonlWriter(f"{work}/removed", compression=None)),
         JsonlWriter(f"{work}/output", compression=None)],
    ]
    tasks = [1, bands, 1, 1]
    for i, (pipeline, n) in enumerate(zip(stages, tasks)):
        LocalPipelineExecutor(pipeline=pipeline, tasks=n, workers=1, logging_dir=f"{work}/logs{i}",
                              skip_completed=False).run()
    seconds = time.time() - start
    import glob
    removed = [json.loads(l)["id"] for f in glob.glob(f"{work}/removed/*.jsonl") for l in open(f)]
    print(json.dumps({"seconds": seconds, "removed": removed}))
    """
)


def score(removed: set[str], pairs: dict[str, str]) -> tuple[float, float]:
    """(recall over planted pairs, precision of removals)."""
    found = sum(1 for copy, orig in pairs.items() if copy in removed or orig in removed)
    in_pairs = set(pairs) | set(pairs.values())
    true_removals = sum(1 for r in removed if r in in_pairs)
    return found / max(1, len(pairs)), true_removals / max(1, len(removed))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--datatrove-python", default="/tmp/venv-datatrove/bin/python")
    parser.add_argument("--work", default=None)
    parser.add_argument("--repeat", type=int, default=3, help="runs of ours (the best wall and CPU time are kept)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="bench-dedup-")
    source = "bench"
    t = time.time()
    write_drop(work, "drop-001", SampleConfig(docs_per_drop=args.docs, files_per_drop=8), source)
    run_raw(RawConfig(f"{work}/landing/{source}", "drop-001", f"{work}/raw/drop-001", docs_per_shard=2500))
    html_to_md(
        SimpleHtmlToMdConfig(f"{work}/raw/drop-001", f"{work}/text/drop-001", "resiliparse", CURATION_EXTRACTION)
    )
    text_dir = f"{work}/text/drop-001"
    n_docs = sum(1 for f in list_files(f"{text_dir}/docs", ".jsonl.gz") for _ in read_jsonl_gz(f))
    print(f"corpus: {n_docs} text documents ({args.docs} pages) prepared in {time.time() - t:.1f}s at {work}")
    with open(ground_truth_path(work, source, "drop-001")) as handle:
        truth = json.load(handle)
    pairs = {d["id"]: d["of"] for d in truth["exact_dups"] + truth["near_dups"]}
    print(f"planted pairs: {len(truth['exact_dups'])} exact + {len(truth['near_dups'])} near")

    # Ours (in-process, one core; includes exact paragraph dedup and writing the index).
    print(f"load average {os.getloadavg()}")
    for threshold, label in ((0.7, "ours (verified, threshold 0.7)"), (0.0, "ours (plain LSH, like datatrove)")):
        ours_s = ours_cpu = float("inf")
        for i in range(max(1, args.repeat)):
            out = f"{work}/dedup-{threshold}-{i}/drop-001"
            t, c = time.perf_counter(), time.process_time()
            dedupe(DedupeConfig(input_path=text_dir, output_path=out, drop_id="drop-001", threshold=threshold))
            ours_s, ours_cpu = min(ours_s, time.perf_counter() - t), min(ours_cpu, time.process_time() - c)
        removed = {
            r["id"]
            for f in list_files(f"{out}/docs", ".jsonl.gz")
            for r in read_jsonl_gz(f)
            if r["attributes"]["fuzzy_duplicate"]
        }
        recall, precision = score(removed, pairs)
        print(
            f"{label}: {ours_s:.2f}s (cpu {ours_cpu:.2f}s)  {n_docs / ours_s:,.0f} docs/s  recall {recall:.4f}"
            f"  precision {precision:.4f}  removed {len(removed)}  load {os.getloadavg()[0]:.1f}"
        )
        if threshold == 0.7:
            best_s, best_cpu = ours_s, ours_cpu

    if not os.path.exists(args.datatrove_python):
        print(f"datatrove: skipped ({args.datatrove_python} missing)")
        return
    script = os.path.join(work, "dt_bench.py")
    with open(script, "w") as handle:
        handle.write(DATATROVE_SCRIPT)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [args.datatrove_python, script, f"{text_dir}/docs", f"{work}/datatrove", "5", "14", "8"],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        print("datatrove failed:", proc.stderr[-3000:])
        sys.exit(1)
    # The child's whole CPU (interpreter start and imports included; its own clock starts later).
    dt_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    removed = set(result["removed"])
    recall, precision = score(removed, pairs)
    print(
        f"datatrove MinHash (4 stages, 1 worker): {result['seconds']:.2f}s (cpu {dt_cpu:.2f}s)  "
        f"{n_docs / result['seconds']:,.0f} docs/s  recall {recall:.4f}  precision {precision:.4f}  "
        f"removed {len(removed)}  load {os.getloadavg()[0]:.1f}"
    )
    print(f"speed ratio ours/datatrove: {result['seconds'] / best_s:.2f}x wall, {dt_cpu / best_cpu:.2f}x cpu")


if __name__ == "__main__":
    main()
