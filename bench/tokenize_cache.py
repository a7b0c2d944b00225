"""Benchmark: the tokenize step vs raw ``tokenizers`` encode_batch (and Levanter's builder).

Three rows against raw ``encode_batch``: the step function ``tokenize(TokenizeConfig(...))``, and
Marin's entry point as a user calls it -- ``default_tokenize(name, dataset, tokenizer)`` run by the
step engine (``run_steps``: planning, status files, metadata; a fresh prefix each round).

Same corpus (stdlib + site-packages docstrings, >= 5 M tokens), same tokenizer, same machine, one
process. Raw ``encode_batch`` and the step (our cache writer, local process pool of ``--workers``,
default all cores) run ``--repeat`` times interleaved and the best of each is compared (robust on a
shared, busy machine). Then the writer on 1, 2, 4 Ray workers (actors) and, with ``--levanter``,
the step with ``writer="levanter"``. Peak RSS is the sum over this process and its child processes
(plus the bench's own Ray processes in the Ray runs), sampled every 50 ms; the sampler's own CPU time is left
out of the CPU seconds (it grows with wall time, i.e. with the machine's load). Prints ratios; no timed asserts.

    .venv/bin/python -m bench.tokenize_cache [--max-bytes 22000000] [--repeat 3] [--levanter] [--work DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sysconfig
import tempfile
import threading
import time

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
}.items():
    os.environ.setdefault(_k, _v)


class PeakRss:
    """Peak of (this process + descendants [+ the processes of one Ray temp dir]) RSS, sampled."""

    def __init__(self, ray_tmp: str | None = None) -> None:
        self.ray_tmp = ray_tmp
        self.peak = 0
        self.cpu = 0.0  # the sampler's own CPU seconds (subtracted from the measured CPU)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        import psutil

        me = psutil.Process()
        procs = [me, *me.children(recursive=True)]
        if self.ray_tmp:  # raylet & co. name the temp dir; workers are their children (renamed ray::...)
            for proc in psutil.process_iter(["cmdline"]):
                with contextlib.suppress(psutil.Error):
                    if any(self.ray_tmp in part for part in (proc.info["cmdline"] or [])):
                        procs += [proc, *proc.children(recursive=True)]
        total = 0
        for proc in {p.pid: p for p in procs}.values():
            with contextlib.suppress(psutil.Error):
                total += proc.memory_info().rss
        return total

    def _run(self) -> None:
        start = time.thread_time()
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(0.05)
        self.cpu = time.thread_time() - start

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def gib(self) -> float:
        return self.peak / 2**30


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the pool's workers, once shut down)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def raw_encode(files: list[str], tokenizer_json: str) -> tuple[int, int]:
    """Read + parse + ``encode_batch`` in batches of 1024; tokens counted with bos/eos (+2 per doc)."""
    from tokenizers import Tokenizer

    from marin_assets.core.documents import iter_texts

    tok = Tokenizer.from_file(tokenizer_json)
    tokens = docs = 0
    batch: list[str] = []
    for text in iter_texts(files):
        batch.append(text)
        if len(batch) == 1024:
            tokens += sum(len(e.ids) + 2 for e in tok.encode_batch(batch))
            docs += len(batch)
            batch = []
    if batch:
        tokens += sum(len(e.ids) + 2 for e in tok.encode_batch(batch))
        docs += len(batch)
    return tokens, docs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-bytes", type=int, default=22_000_000)
    parser.add_argument("--work", default="/tmp/bench-tokenize")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="local processes (default: all cores)")
    parser.add_argument("--ray-workers", default="1,2,4")
    parser.add_argument("--levanter", action="store_true", help="also time writer='levanter' (slow)")
    args = parser.parse_args()

    from marin_assets.core.documents import list_document_files
    from marin_assets.execution.runner import run_steps
    from marin_assets.experiments.defaults import default_tokenize
    from marin_assets.experiments.sample_documents import SampleDocumentsConfig, write_sample_documents
    from marin_assets.processing.tokenize.cache_writer import build_cache
    from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize
    from marin_assets.processing.tokenize.train_tokenizer import TokenizerConfig, train_tokenizer

    work = args.work
    docs = os.path.join(work, "docs")
    if not os.path.exists(os.path.join(docs, "train")):
        # stdlib alone is ~1.2 MB of long docstrings; site-packages brings it past 5 M tokens.
        site = sysconfig.get_paths()["purelib"]
        write_sample_documents(
            SampleDocumentsConfig(output_path=docs, max_bytes=args.max_bytes, source_dir=site, docs_per_file=4000)
        )
    tok_dir = os.path.join(work, "tok")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        train_tokenizer(
            TokenizerConfig(
                input_paths=[os.path.join(docs, "train")], output_path=tok_dir, vocab_size=4096, max_documents=20_000
            )
        )
    files = list_document_files(os.path.join(docs, "train"))
    cores = len(os.sched_getaffinity(0))
    workers = args.workers or cores
    print(
        f"corpus: {len(files)} files, {sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB gz; cores={cores}; "
        f"load average {os.getloadavg()[0]:.1f} (a shared machine: absolute figures are noisy, ratios count)"
    )

    def step(writer: str, out: str) -> tuple[dict, float, float]:
        shutil.rmtree(out, ignore_errors=True)
        config = TokenizeConfig(
            train_paths=files, validation_paths=[], cache_path=out, tokenizer=tok_dir, writer=writer, workers=workers
        )
        with PeakRss(os.environ.get("MARIN_RAY_TMPDIR") if writer == "levanter" else None) as rss:
            t0, c0 = time.perf_counter(), cpu_seconds()
            meta = tokenize(config)
            seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        return meta, seconds, rss.gib, cpu - rss.cpu

    def user_entry_point(prefix: str) -> tuple[int, float, float]:
        """``default_tokenize`` through the engine, as a Marin script runs it; returns (tokens, seconds, CPU s)."""
        shutil.rmtree(prefix, ignore_errors=True)
        step = default_tokenize("bench", os.path.join(docs, "train"), tok_dir)
        t0, c0 = time.perf_counter(), cpu_seconds()
        report = run_steps([step], prefix)
        seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        if report.failed:
            raise RuntimeError(f"default_tokenize failed: {report.failed[0].error}")
        from marin_assets.execution.status import read_metadata
        from marin_assets.execution.versioning import StepGraph

        meta = read_metadata(StepGraph([step], prefix).resolved(step).output_path)
        return int(meta["tokens"]), seconds, cpu

    user_best = user_cpu = float("inf")
    user_tokens = 0
    raw_best = step_best = raw_cpu = step_cpu = float("inf")
    raw_tokens = step_tokens = 0
    raw_rss = step_rss = 0.0
    for i in range(max(1, args.repeat)):
        with PeakRss() as rss:
            t0, c0 = time.perf_counter(), cpu_seconds()
            raw_tokens, raw_docs = raw_encode(files, os.path.join(tok_dir, "tokenizer.json"))
            raw_s, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        cpu -= rss.cpu
        raw_best, raw_rss, raw_cpu = min(raw_best, raw_s), max(raw_rss, rss.gib), min(raw_cpu, cpu)
        meta, step_s, rss_gib, cpu = step("marin", os.path.join(work, "step"))
        step_best, step_tokens, step_rss = min(step_best, step_s), meta["tokens"], max(step_rss, rss_gib)
        step_cpu = min(step_cpu, cpu)
        user_tokens, user_s, cpu = user_entry_point(os.path.join(work, "prefix"))
        user_best, user_cpu = min(user_best, user_s), min(user_cpu, cpu)
        print(
            f"  round {i + 1}: raw {raw_s:6.2f} s   step {step_s:6.2f} s   default_tokenize {user_s:6.2f} s   "
            f"load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
    raw_rate, step_rate = raw_tokens / raw_best, step_tokens / step_best
    print(
        f"raw encode_batch (1 process):   {raw_tokens:>10,} tokens {raw_docs:,} docs  best {raw_best:6.2f} s "
        f"= {raw_rate:>10,.0f} tok/s  peak RSS {raw_rss:.2f} GiB"
    )
    print(
        f"tokenize step (marin, {workers} procs): {step_tokens:>10,} tokens  best {step_best:6.2f} s "
        f"= {step_rate:>10,.0f} tok/s  peak RSS {step_rss:.2f} GiB"
    )
    print(f"ratio step/raw = {step_rate / raw_rate:.3f}  (goal >= 0.9)")
    user_rate = user_tokens / user_best
    print(
        f"default_tokenize via the engine (Marin's entry point): {user_tokens:>10,} tokens  best {user_best:6.2f} s "
        f"= {user_rate:>10,.0f} tok/s"
    )
    print(f"ratio default_tokenize/raw = {user_rate / raw_rate:.3f}  (goal >= 0.9)")
    print(
        f"CPU seconds (best): raw {raw_cpu:.2f}, step {step_cpu:.2f} (parent + workers): "
        f"CPU-efficiency ratio {raw_cpu / step_cpu * step_tokens / raw_tokens:.3f}; default_tokenize "
        f"{user_cpu:.2f}: {raw_cpu / user_cpu * user_tokens / raw_tokens:.3f}"
    )
    print(f"  token counts differ by {step_tokens - raw_tokens:+,}: Levanter's bos/eos come with a space each side")

    ray_tmp = tempfile.mkdtemp(prefix="mbt-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = ray_tmp
    try:
        from marin_resources.ray_connect import ensure_ray
        from marin_resources.ray_head import stop_embedded_head

        cpus = int(ensure_ray().get("CPU", 1))
        build_cache(files[:1], os.path.join(work, "ray-warm/train"), tok_dir, workers=1, backend="ray")
        base = None
        for count in [int(n) for n in args.ray_workers.split(",") if n]:
            out = os.path.join(work, f"ray-{count}/train")
            shutil.rmtree(os.path.dirname(out), ignore_errors=True)
            with PeakRss(ray_tmp) as rss:
                t0 = time.perf_counter()
                meta = build_cache(files, out, tok_dir, workers=count, backend="ray")
                seconds = time.perf_counter() - t0
            rate = meta["tokens"] / seconds
            base = base or rate
            print(
                f"marin writer on {count} Ray workers ({cpus} Ray CPUs, {cores} cores): {seconds:6.2f} s "
                f"= {rate:>10,.0f} tok/s  x{rate / base:.2f} vs 1 worker, {rate / raw_rate:.2f} x raw  "
                f"peak RSS {rss.gib:.2f} GiB",
                flush=True,
            )
        if args.levanter:
            meta, seconds, rss_gib, _ = step("levanter", os.path.join(work, "levanter"))
            rate = meta["tokens"] / seconds
            print(
                f"tokenize step (levanter builder): {meta['tokens']:>10,} tokens in {seconds:6.2f} s "
                f"= {rate:>10,.0f} tok/s  ratio {rate / raw_rate:.3f} x raw, marin/levanter {step_rate / rate:.2f}  "
                f"peak RSS {rss_gib:.2f} GiB"
            )
            assert meta["tokens"] == step_tokens, "both writers must store the same tokens"
    finally:
        import ray

        ray.shutdown()
        stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
