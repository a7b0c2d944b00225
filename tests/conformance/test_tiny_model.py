"""Marin's CPU tutorial (tokenize a local folder with a local tokenizer, train llama_nano) runs here
with only its imports changed, gives the hashes of Marin's rule and re-runs fully cached."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conformance.marin_import import recorded_paths, run_marin_script, summary
from tests.conftest import marin_hash

pytestmark = pytest.mark.slow


def llama_nano_repr() -> str:
    """How ``versioned(llama_nano)`` enters the version: Marin's encoder writes ``str(config)``."""
    from levanter.models.llama import LlamaConfig

    return repr(
        LlamaConfig(seq_len=512, hidden_dim=32, intermediate_dim=128, num_heads=2, num_kv_heads=2, num_layers=2)
    )


def write_inputs(root: Path) -> None:
    """A folder of jsonl documents and a tokenizer directory trained on them."""
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

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


def test_mixture_of_tokenize_steps_versions_and_resolves_like_marin(tmp_path):
    """``lm_mixture_data_config`` over two tokenize steps: Marin's version keys, concrete caches when
    instantiated, and the training config the step function derives from them."""
    from marin_assets.execution.executor import versioned
    from marin_assets.execution.versioning import StepGraph, instantiate_config
    from marin_assets.experiments.defaults import default_tokenize, default_train, lm_mixture_data_config
    from marin_assets.experiments.llama import llama_nano
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_assets.training.levanter_config import build_levanter_config
    from marin_resources import CpuOnlyConfig

    write_inputs(tmp_path)
    web = default_tokenize("web", str(tmp_path / "local_docs"), str(tmp_path / "local_tokenizer"))
    code = default_tokenize("code", str(tmp_path / "local_docs"), str(tmp_path / "local_tokenizer"), sample_count=5)
    mixture = lm_mixture_data_config({"web": web, "code": code}, {"web": 0.75, "code": 0.25})
    train = default_train(
        "mix",
        mixture,
        versioned(llama_nano),
        SimpleTrainConfig(
            resources=CpuOnlyConfig(num_cpus=1), train_batch_size=4, num_train_steps=3, learning_rate=1e-3
        ),
        eval_harness_tasks=[],
    )
    graph = StepGraph([train], str(tmp_path / "prefix"))
    node = graph.resolved(train)
    tokenizer = str(tmp_path / "local_tokenizer")
    assert node.version["config"] == {
        "train_config.data.configs.web.cache_dir": "DEP[0]",
        "train_config.data.configs.code.cache_dir": "DEP[1]",
        "train_config.data.tokenizer": tokenizer,
        "train_config.model": llama_nano_repr(),
    }
    assert [d["name"] for d in node.version["dependencies"]] == ["tokenized/web", "tokenized/code"]
    resolved = instantiate_config(train.config, node, None, graph)
    caches = {name: source.cache_dir for name, source in resolved.train_config.data.configs.items()}
    assert caches == {"web": graph.resolved(web).output_path, "code": graph.resolved(code).output_path}
    lev = build_levanter_config(resolved)
    assert lev.data.train_weights == {"web": 0.75, "code": 0.25}
    assert {name: source.cache_dir for name, source in lev.data.configs.items()} == caches
    assert (lev.model.hidden_dim, lev.model.num_layers, lev.model.seq_len) == (32, 2, 512)
    assert lev.trainer.require_accelerator is False and lev.data.tokenizer == tokenizer
    fixed = default_train(
        "mix",
        mixture,
        versioned(llama_nano),
        SimpleTrainConfig(
            resources=CpuOnlyConfig(num_cpus=1),
            train_batch_size=4,
            num_train_steps=3,
            learning_rate=1e-3,
            beta1=0.8,
        ),
        eval_harness_tasks=[],
        override_output_path="checkpoints/fixed-mix",
    )
    fixed_graph = StepGraph([fixed], "/p")
    assert fixed_graph.resolved(fixed).output_path == "/p/checkpoints/fixed-mix"
    applied = build_levanter_config(instantiate_config(fixed.config, fixed_graph.resolved(fixed), None, fixed_graph))
    assert applied.optimizer.beta1 == 0.8  # every SimpleTrainConfig field reaches Levanter
