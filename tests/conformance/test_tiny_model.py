"""Marin's CPU tutorial (tokenize a local folder with a local tokenizer, train llama_nano) runs here
with only its imports changed, gives the hashes of Marin's rule and re-runs fully cached."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from tests.conformance.marin_import import recorded_paths, run_marin_script, summary

pytestmark = pytest.mark.slow


def marin_hash(version: dict) -> str:
    """Marin: ``hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]``."""
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


def llama_nano_repr() -> str:
    """How ``versioned(llama_nano)`` enters the version: Marin's encoder writes ``str(config)``."""
    from levanter.models.llama import LlamaConfig

    return repr(
        LlamaConfig(seq_len=512, hidden_dim=32, intermediate_dim=128, num_heads=2, num_kv_heads=2, num_layers=2)
    )


def write_inputs(root: Path) -> None:
    """A folder of jsonl documents and a tokenizer directory trained on them."""
    from marin_assets.models.tokenizer import build_fast_tokenizer

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
    texts = [" ".join(words[(i + j) % len(words)] for j in range(60)) + f" document {i}." for i in range(240)]
    docs = root / "local_docs"
    docs.mkdir()
    with gzip.open(docs / "part-0.jsonl.gz", "wt") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")
    tokenizer = build_fast_tokenizer(texts, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(root / "local_tokenizer")


def test_cpu_tiny_model_tutorial(prefix, tmp_path):
    write_inputs(tmp_path)
    tokenized = {
        "name": "tokenized/tiny_docs",
        "config": {"tokenizer": "local_tokenizer", "sample_count": 200},
        "dependencies": [],
    }
    # default_train versions what the script versioned (the model) and what the data carries: the
    # cache as DEP[0] and the tokenize step's versioned tokenizer; SimpleTrainConfig's plain values
    # do not enter the version.
    train = {
        "name": "checkpoints/tiny-llama-nano",
        "config": {
            "train_config.data.configs.tiny_docs.cache_dir": "DEP[0]",
            "train_config.data.tokenizer": "local_tokenizer",
            "train_config.model": llama_nano_repr(),
        },
        "dependencies": [tokenized],
    }
    assert marin_hash(tokenized) == "cfc9e0"
    assert marin_hash(train) == "09718d"  # pinned with the constraints' Levanter (its LlamaConfig repr)
    first = run_marin_script("tiny_model", prefix, cwd=str(tmp_path), timeout=900)
    assert first.returncode == 0, first.stderr[-4000:]
    assert summary(first)["ran"] == 2
    paths = recorded_paths(prefix)
    assert paths["tokenized/tiny_docs"] == [f"tokenized/tiny_docs-{marin_hash(tokenized)}"]
    assert paths["checkpoints/tiny-llama-nano"] == [f"checkpoints/tiny-llama-nano-{marin_hash(train)}"]
    out = Path(prefix, paths["checkpoints/tiny-llama-nano"][0])
    assert json.loads((out / ".executor_status").read_text())["status"] == "SUCCESS"
    assert any(out.rglob("config.json")), "no HF export written"
    again = run_marin_script("tiny_model", prefix, cwd=str(tmp_path), timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    assert (summary(again)["ran"], summary(again)["cached"]) == (0, 2)
