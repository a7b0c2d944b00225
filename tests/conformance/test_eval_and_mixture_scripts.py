"""Marin's eval tutorial and DCLM mixture shapes run here with only their imports changed, offline on
CPU, and re-run fully cached; an lm-eval task whose data is missing fails naming the task."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from tests.conformance.marin_import import recorded_paths, run_marin_script, summary
from tests.conftest import marin_hash

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


def write_docs(folder: Path, texts: list[str]) -> None:
    folder.mkdir(parents=True)
    with gzip.open(folder / "part-0.jsonl.gz", "wt") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")


def write_tokenizer(path: Path, texts: list[str]):
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    tokenizer = build_fast_tokenizer(texts, vocab_size=400, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(path)
    return tokenizer


def write_hf_model(path: Path, tokenizer) -> None:
    """A tiny randomly initialised Llama in HF format (what a training run exports)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


def texts(n: int, shift: int = 0) -> list[str]:
    return [" ".join(WORDS[(i + j + shift) % len(WORDS)] for j in range(50)) + f" record {i}." for i in range(n)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_eval_tutorial_shape_runs_offline_and_reruns_cached(prefix, tmp_path):
    tokenizer = write_tokenizer(tmp_path / "tok", texts(100))
    write_hf_model(tmp_path / "local_model", tokenizer)
    # An EvaluationConfig step with nothing versioned: Marin's hash is that of its name alone.
    direct = {"name": "tutorials/eval_tiny_model_cpu/local_tasks", "config": {}, "dependencies": []}
    first = run_marin_script("eval_model", prefix, cwd=str(tmp_path), timeout=800)
    assert first.returncode == 0, first.stderr[-4000:]
    assert summary(first)["ran"] == 2
    paths = recorded_paths(prefix)
    assert paths[direct["name"]] == [f"{direct['name']}-{marin_hash(direct)}"]
    (default_name,) = [name for name in paths if name.startswith("evaluation/lm_evaluation_harness_levanter/")]
    assert default_name == "evaluation/lm_evaluation_harness_levanter/lmeval_debug_local_model"
    mc = json.loads(Path(prefix, paths[direct["name"]][0], "results.json").read_text())["results"]
    assert 0.0 <= mc["marin_docstring_mc"]["acc,none"] <= 1.0
    ppl = json.loads(Path(prefix, paths[default_name][0], "results.json").read_text())["results"]
    assert math.isfinite(ppl["marin_docstring_ppl"]["bits_per_byte,none"])
    again = run_marin_script("eval_model", prefix, cwd=str(tmp_path), timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    assert (summary(again)["ran"], summary(again)["cached"]) == (0, 2)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_tokenize_mixture_train_eval_shape_runs_and_reruns_cached(prefix, tmp_path):
    import yaml

    write_docs(tmp_path / "local_docs" / "web", texts(200))
    write_docs(tmp_path / "local_docs" / "code", [f"def f{i}(x):\n    return x + {i}\n" for i in range(200)])
    write_tokenizer(tmp_path / "local_tokenizer", texts(200) + [f"def f{i}(x): return x + {i}" for i in range(200)])
    first = run_marin_script("tokenize_mixture", prefix, cwd=str(tmp_path), timeout=1100)
    assert first.returncode == 0, first.stderr[-4000:]
    assert summary(first)["ran"] == 4
    paths = recorded_paths(prefix)
    web = {"name": "tokenized/web", "config": {"tokenizer": "local_tokenizer"}, "dependencies": []}
    code = {
        "name": "tokenized/code",
        "config": {"tokenizer": "local_tokenizer", "sample_count": 60},
        "dependencies": [],
    }
    assert paths["tokenized/web"] == [f"tokenized/web-{marin_hash(web)}"]
    assert paths["tokenized/code"] == [f"tokenized/code-{marin_hash(code)}"]
    code_stats = json.loads(Path(prefix, paths["tokenized/code"][0], "tokenize_stats.json").read_text())
    assert code_stats["documents"] == 60 and code_stats["writer"] == "marin"  # Marin's entry point, our writer
    train_out = Path(prefix, paths["checkpoints/mixture-llama-nano"][0])
    written = yaml.safe_load((train_out / "train_config.yaml").read_text())
    assert written["data"]["train_weights"] == {"web": 0.7, "code": 0.3}
    assert (written["optimizer"]["beta2"], written["optimizer"]["max_grad_norm"]) == (0.98, 0.5)
    assert written["model"]["seq_len"] == 64
    (eval_name,) = [name for name in paths if name.startswith("evaluation/")]
    results = json.loads(Path(prefix, paths[eval_name][0], "results.json").read_text())["results"]
    assert 0.0 <= results["marin_docstring_mc"]["acc,none"] <= 1.0
    again = run_marin_script("tokenize_mixture", prefix, cwd=str(tmp_path), timeout=600)
    assert again.returncode == 0, again.stderr[-4000:]
    assert (summary(again)["ran"], summary(again)["cached"]) == (0, 4)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_missing_task_data_fails_naming_the_task_without_downloading(tmp_path, monkeypatch):
    from marin_assets.eval_data.task_data import TaskDataMissing
    from marin_assets.evaluation.evaluation_config import EvalTaskConfig, EvaluationConfig
    from marin_assets.evaluation.run import evaluate

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))  # nothing cached
    tokenizer = write_tokenizer(tmp_path / "tok", texts(100))
    write_hf_model(tmp_path / "model", tokenizer)
    config = EvaluationConfig(
        evaluator="lm_evaluation_harness_hf",
        model_name="tiny",
        model_path=str(tmp_path / "model"),
        evaluation_path=str(tmp_path / "out"),
        evals=[EvalTaskConfig("marin_docstring_mc", 0), EvalTaskConfig("piqa", 0)],
        max_eval_instances=2,
    )
    with pytest.raises(TaskDataMissing) as info:
        evaluate(config)
    message = str(info.value)
    assert "'piqa'" in message and "marin_docstring_mc" not in message
    assert "huggingface" in message and "include_path" in message
    assert not (tmp_path / "out" / "results.json").exists()
    # Nothing of piqa was fetched (the local task's json was prepared into the cache, as datasets does).
    assert not [p for p in (tmp_path / "empty_hf_home").rglob("*") if "piqa" in str(p).lower()]
