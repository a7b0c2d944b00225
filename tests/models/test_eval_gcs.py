"""The evaluation on gs:// (a real GCS API server): caches, HF export and results all remote, and
Levanter's bits-per-byte is recorded -- not skipped by a local-only existence check."""

from __future__ import annotations

import gzip
import json
import math

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


def _texts(n: int, shift: int) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j + shift) % len(WORDS)] for j in range(40)) + f" item {i}." for i in range(n)]


def _write(folder, texts) -> str:
    folder.mkdir(parents=True)
    with gzip.open(folder / "part-0.jsonl.gz", "wt") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")
    return str(folder)


def test_eval_on_gcs_records_levanter_bits_per_byte(gcs_server, gcs_prefix, monkeypatch, tmp_path):
    import fsspec
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from marin_assets.evaluation.evaluation_config import EvaluationConfig
    from marin_assets.evaluation.run import evaluate
    from marin_assets.experiments.evals.task_configs import LOCAL_TASKS
    from marin_assets.processing.tokenize.tokenize import TokenizeConfig, tokenize
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    # Levanter reads the cache with tensorstore, which needs its own pointer at the server.
    monkeypatch.setenv("TENSORSTORE_GCS_HTTP_URL", gcs_server.url)
    monkeypatch.setenv("GOOGLE_AUTH_TOKEN_FOR_TESTING", "anonymous")
    train, heldout = _texts(200, 0), _texts(64, 3)
    tokenizer = build_fast_tokenizer(train, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(tmp_path / "tok")
    cache = f"{gcs_prefix}/tokenized/heldout"
    stats = tokenize(
        TokenizeConfig(
            train_paths=[],
            validation_paths=[_write(tmp_path / "heldout", heldout)],
            cache_path=cache,
            tokenizer=str(tmp_path / "tok"),
        )
    )
    assert stats["splits"]["validation"]["documents"] == 64

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
    )
    model.save_pretrained(tmp_path / "hf")
    tokenizer.save_pretrained(tmp_path / "hf")
    fs = fsspec.filesystem("gs")
    export = f"{gcs_prefix}/checkpoints/run/hf/step-3"
    fs.put(str(tmp_path / "hf"), export, recursive=True)
    fs.invalidate_cache()

    out = f"{gcs_prefix}/evaluation/run"
    meta = evaluate(
        EvaluationConfig(
            evaluator="levanter_lm_evaluation_harness",
            model_name=None,
            model_path=f"{gcs_prefix}/checkpoints/run/hf",
            evaluation_path=out,
            evals=[LOCAL_TASKS[0]],
            max_eval_instances=4,
            discover_latest_checkpoint=True,
            validation_caches={"heldout": cache},
            max_eval_batches=2,
        )
    )
    fs.invalidate_cache()
    results = json.loads(fs.cat(f"{out}/results.json"))["results"]
    bpb = results["levanter_validation/heldout"]["bpb,none"]
    assert math.isfinite(bpb) and bpb > 0
    assert meta["levanter_validation/heldout/bpb"] == pytest.approx(bpb) and meta["levanter_eval_s"] > 0
    assert 0.0 <= meta["marin_docstring_mc/acc"] <= 1.0
    # The metadata names the export that was evaluated, not the worker's temporary copy of it.
    assert meta["hf_export"] == export
    # Both evaluations' logs are kept beside results.json, not left in the worker's /tmp.
    assert fs.size(f"{out}/lm_eval.log") > 0
    assert fs.size(f"{out}/levanter_eval.log") > 0
