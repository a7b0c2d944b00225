"""Benchmark: the tokenize step vs raw ``tokenizers`` encode_batch vs Levanter's builder called directly.

Same corpus (stdlib + site-packages docstrings, >= 5 M tokens), same tokenizer, same machine.
Prints tokens/s and ratios; no timed asserts.

    .venv/bin/python -m bench.tokenize_cache [--max-bytes 22000000] [--work /tmp/bench-tokenize]
"""

from __future__ import annotations

# This file is named like the stdlib module ``tokenize``; drop its folder from sys.path so that
# ``import tokenize`` elsewhere (linecache, inspect, ...) gets the standard library's.
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _HERE]
if getattr(_sys.modules.get("tokenize"), "__file__", None) == _os.path.abspath(__file__):
    del _sys.modules["tokenize"]

import argparse  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sysconfig  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from marin_resources.ray_cluster import stop_embedded_head  # noqa: E402 - targeted: only this temp dir's Ray

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
}.items():
    os.environ.setdefault(_k, _v)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-bytes", type=int, default=22_000_000)
    parser.add_argument("--work", default="/tmp/bench-tokenize")
    args = parser.parse_args()

    from marin_assets.models._io import iter_texts, list_document_files
    from marin_assets.models.sample_documents import SampleDocumentsConfig, write_sample_documents
    from marin_assets.models.tokenize import TokenizeConfig, _build_split, cache_split_stats, tokenize
    from marin_assets.models.tokenizer import TokenizerConfig, train_tokenizer

    work = args.work
    os.makedirs(work, exist_ok=True)
    docs = os.path.join(work, "docs")
    if not os.path.exists(os.path.join(docs, "train")):
        site = sysconfig.get_paths()["purelib"]
        # stdlib alone is ~1.2 MB of long docstrings; site-packages brings it past 5 M tokens.
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
    print(
        f"corpus: {len(files)} files, {sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB gz, cores={os.cpu_count()}"
    )

    # 1. raw tokenizers encode_batch (read + encode, bos/eos counted as Levanter adds them)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    t0 = time.monotonic()
    raw_tokens = raw_docs = 0
    batch: list[str] = []
    for text in iter_texts(files):
        batch.append(text)
        if len(batch) == 1024:
            raw_tokens += sum(len(e.ids) + 2 for e in tok.encode_batch(batch))
            raw_docs += len(batch)
            batch = []
    if batch:
        raw_tokens += sum(len(e.ids) + 2 for e in tok.encode_batch(batch))
        raw_docs += len(batch)
    raw_s = time.monotonic() - t0
    print(
        f"raw encode_batch:       {raw_tokens:>10,} tokens {raw_docs:,} docs in {raw_s:6.1f} s = {raw_tokens / raw_s:>10,.0f} tok/s"
    )

    ray_tmp = tempfile.mkdtemp(prefix="mbt-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = ray_tmp
    try:
        from marin_resources.ray_cluster import ensure_ray

        ensure_ray()
        # Warm-up: Ray worker start-up (imports of levanter/jax) is paid once per cluster.
        warm = os.path.join(work, "warm")
        shutil.rmtree(warm, ignore_errors=True)
        tokenize(
            TokenizeConfig(
                train_paths=[files[0]], validation_paths=[], cache_path=warm, tokenizer=tok_dir, sample_count=50
            )
        )

        # 2. Levanter's builder called directly (same options the step picks)
        direct = os.path.join(work, "direct")
        shutil.rmtree(direct, ignore_errors=True)
        cfg = TokenizeConfig(train_paths=files, validation_paths=[], cache_path=direct, tokenizer=tok_dir)
        groups = min(len(files), max(1, int(ensure_ray().get("CPU", 1)) // 4))
        t0 = time.monotonic()
        _build_split(cfg, "train", files, groups)
        direct_s = time.monotonic() - t0
        direct_tokens = cache_split_stats(os.path.join(direct, "train"))["tokens"]
        print(
            f"levanter builder:       {direct_tokens:>10,} tokens in {direct_s:6.1f} s = {direct_tokens / direct_s:>10,.0f} tok/s"
        )

        # 3. the step function (what the engine runs)
        step_out = os.path.join(work, "step")
        shutil.rmtree(step_out, ignore_errors=True)
        t0 = time.monotonic()
        meta = tokenize(TokenizeConfig(train_paths=files, validation_paths=[], cache_path=step_out, tokenizer=tok_dir))
        step_s = time.monotonic() - t0
        print(
            f"tokenize step:          {meta['tokens']:>10,} tokens in {step_s:6.1f} s = {meta['tokens'] / step_s:>10,.0f} tok/s"
        )
        assert meta["tokens"] == direct_tokens
        print(f"ratio step/raw      = {(meta['tokens'] / step_s) / (raw_tokens / raw_s):.3f}")
        print(f"ratio step/levanter = {(meta['tokens'] / step_s) / (direct_tokens / direct_s):.3f}")
        print(
            f"token count step vs raw encode: {meta['tokens']} vs {raw_tokens} (Levanter inserts spaces around bos/eos)"
        )
    finally:
        import ray

        ray.shutdown()
        stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
