"""Benchmark: peak RSS of each curation stage per 10k documents.

Each stage runs in a fresh child process (in-process mode, no Ray) on a drop of ``--docs``
pages, and the child's peak RSS (``VmHWM``) is reported, with the baseline of a child that
only imports the modules, so the difference is what the stage itself holds.

Usage: ``.venv/bin/python -m bench.curation_memory [--docs 10000]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
from marin_assets.classifiers.utils import DatasetConfig
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.processing.classification import consolidate, inference
from marin_assets.processing.classification import dedupe as dedup
from marin_assets.processing.classification.fasttext import train_fasttext
from marin_assets.transform.raw import process as raw
from marin_assets.transform.simple_html_to_md import process as html_to_text
stage, work = sys.argv[1], sys.argv[2]
t = time.time()
text = f"{work}/text/drop-001"
if stage == "raw":
    raw.run_raw(raw.RawConfig(f"{work}/landing/bench", "drop-001", f"{work}/raw/drop-001"))
elif stage == "text":
    html_to_text.html_to_md(html_to_text.SimpleHtmlToMdConfig(f"{work}/raw/drop-001", text, "resiliparse",
                                                              CURATION_EXTRACTION))
elif stage == "quality_model":
    # Two labels over the same drop: memory, not accuracy, is measured here.
    train_fasttext.train(train_fasttext.TrainFasttextClassifierConfig(
        f"{work}/model", [DatasetConfig(text, "hq", 0.5), DatasetConfig(text, "lq", 0.5)], {"epoch": 5}))
elif stage == "quality":
    inference.run_inference(inference.InferenceConfig(text, f"{work}/model", "quality", "fasttext",
                                                      f"{work}/quality/drop-001"))
elif stage == "dedup":
    dedup.dedupe(dedup.DedupeConfig(text, f"{work}/dedup/drop-001", drop_id="drop-001"))
elif stage == "consolidate":
    consolidate.consolidate(consolidate.ConsolidateConfig(text, f"{work}/out/drop-001", [
        consolidate.FilterConfig("classify", f"{work}/quality/drop-001", "quality", "__label__hq", 0.5),
        consolidate.FilterConfig("remove_docs", f"{work}/dedup/drop-001", "fuzzy_duplicate"),
        consolidate.FilterConfig("remove_spans", f"{work}/dedup/drop-001", "duplicate_text"),
    ]))
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent that forked this child.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak_mib": hwm / 1024, "seconds": time.time() - t}))
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=10_000)
    args = parser.parse_args()
    from marin_assets.experiments.sample_data import SampleConfig, write_drop

    work = tempfile.mkdtemp(prefix="bench-mem-")
    write_drop(work, "drop-001", SampleConfig(docs_per_drop=args.docs, files_per_drop=4), "bench")
    scale = 10_000 / args.docs
    print(f"{args.docs} pages; peak RSS per stage (child process), scaled to 10k docs where it grows with size")
    for stage in ("baseline", "raw", "text", "quality_model", "quality", "dedup", "consolidate"):
        proc = subprocess.run([sys.executable, "-c", CHILD, stage, work], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            print(f"{stage}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        if stage == "baseline":
            base = r["peak_mib"]
            print(f"{'imports only':14s}: {base:7.1f} MiB")
            continue
        print(
            f"{stage:14s}: {r['peak_mib']:7.1f} MiB peak  (+{r['peak_mib'] - base:6.1f} MiB over imports, "
            f"~{(r['peak_mib'] - base) * scale:6.1f} MiB per 10k docs)  {r['seconds']:.1f}s"
        )


if __name__ == "__main__":
    main()
