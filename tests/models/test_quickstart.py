"""End to end: documents -> tokenizer -> Levanter cache -> Levanter training -> eval, via the engine."""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import pytest

from marin_assets.core.documents import iter_texts, list_document_files
from marin_assets.execution.status import read_metadata, read_status

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(600)]


def test_every_step_succeeded_with_sane_metadata(quickstart_run):
    paths = quickstart_run["paths"]
    assert set(paths) == {"documents", "tokenizers", "tokenized", "checkpoints", "evaluation"}
    for path in paths.values():
        assert read_status(path).status == "SUCCESS"
    tok_meta = read_metadata(paths["tokenized"])
    assert tok_meta["tokens"] > 50_000 and tok_meta["tokens_per_s"] > 0
    assert tok_meta["cache_path"] == paths["tokenized"]
    assert set(tok_meta["splits"]) == {"train", "validation"}


def test_cache_token_counts_match_the_ledger_and_the_documents(quickstart_run):
    from levanter.store.cache import TreeCache

    paths = quickstart_run["paths"]
    meta = read_metadata(paths["tokenized"])
    for split in ("train", "validation"):
        split_path = os.path.join(paths["tokenized"], split)
        with open(os.path.join(split_path, "shard_ledger.json")) as handle:
            ledger = json.load(handle)
        assert ledger["is_finished"]
        # Every input document became exactly one cache row.
        docs = list(iter_texts(list_document_files(os.path.join(paths["documents"], split))))
        assert ledger["total_num_rows"] == len(docs) == meta["splits"][split]["documents"]
        # Reading every row back gives the token count the step reported.
        cache = TreeCache.load(split_path, {"input_ids": np.zeros((0,), dtype=np.int32)})
        rows = cache.get_batch_sync(list(range(len(cache))))
        assert sum(len(r["input_ids"]) for r in rows) == meta["splits"][split]["tokens"]
        # Rows start with bos and end with eos (Levanter enforced them with our tokenizer).
        assert rows[0]["input_ids"][0] == 0 and rows[0]["input_ids"][-1] == 1


def test_training_decreases_loss_and_writes_checkpoints_and_hf_export(quickstart_run):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = quickstart_run["paths"]["checkpoints"]
    meta = read_metadata(out)
    assert meta["final_loss"] < meta["initial_loss"] - 0.5, meta
    assert meta["eval_loss"] < meta["initial_eval_loss"], meta
    assert meta["parameter_count"] > 10_000
    assert meta["tokens_seen"] == 24 * 16 * 64 and meta["tokens_per_s"] > 0
    # Every 10 steps, and the last step always (issue 35): a finished run can be continued.
    assert [os.path.basename(p) for p in meta["checkpoints"]] == ["step-10", "step-20", "step-23"]
    assert os.path.basename(meta["hf_export"]) == "step-23"
    assert meta["loss_curve"]["value"].startswith("![loss curve](data:image/png;base64,")
    # Numbers Dagster can plot: flat floats, and the curve as a table (one row per logged step).
    assert isinstance(meta["final_loss"], float) and isinstance(meta["eval/quickstart-test/loss"], float)
    rows = meta["loss_table"]["value"]
    assert meta["loss_table"]["__marin_metadata_type__"] == "table" and rows[-1]["step"] >= 20
    assert rows[-1]["train_loss"] == pytest.approx(meta["final_loss"])
    assert os.path.getsize(os.path.join(out, "loss_curve.png")) > 1000
    # The HF export is a working transformers model whose loss matches Levanter's.
    model = AutoModelForCausalLM.from_pretrained(meta["hf_export"])
    tok = AutoTokenizer.from_pretrained(meta["hf_export"])
    ids = torch.tensor([tok("Return the number of items in the container.")["input_ids"]])
    with torch.no_grad():
        loss = model(ids, labels=ids).loss.item()
    assert math.isfinite(loss) and loss < meta["initial_loss"]
    # The metrics log is Levanter's JSON tracker output.
    with open(os.path.join(out, "metrics.jsonl")) as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    assert any("train/loss" in r["metrics"] for r in records)
    # A CPU run: no watch hook (whose jit hook would compile the train step a second time) and no
    # jaxpr/HLO artifacts; the config that ran says so and no artifact was written.
    import yaml

    with open(os.path.join(out, "train_config.yaml")) as handle:
        trainer = yaml.safe_load(handle)["trainer"]
    assert trainer["watch"]["interval"] == 0 and not trainer["log_jaxprs"] and not trainer["log_xla_hlo"]
    assert not [
        p for p in glob.glob(os.path.join(out, "logs", "**", "*"), recursive=True) if "jaxpr" in p or "hlo" in p
    ]


def test_eval_writes_results_for_every_task_with_finite_bpb(quickstart_run):
    from marin_assets.experiments.evals.task_configs import LOCAL_TASKS

    out = quickstart_run["paths"]["evaluation"]
    with open(os.path.join(out, "results.json")) as handle:
        results = json.load(handle)["results"]
    for task in LOCAL_TASKS:
        assert task.name in results, sorted(results)
    assert 0.0 <= results["marin_docstring_mc"]["acc,none"] <= 1.0
    assert math.isfinite(results["marin_docstring_cloze"]["perplexity,none"])
    lev = results["levanter_validation/quickstart-test"]  # the component is named after its tokenize step
    assert math.isfinite(lev["bpb,none"]) and 0 < lev["bpb,none"] < 10
    # Levanter (JAX, on the cache) and lm-eval (torch, on the HF export) measure bits per byte of
    # similar held-out docstrings: the two should be in the same range.
    assert abs(lev["bpb,none"] - results["marin_docstring_ppl"]["bits_per_byte,none"]) < 1.0
    meta = read_metadata(out)
    assert "| marin_docstring_mc | acc |" in meta["metrics"]["value"]
    # Every metric is a flat float in the materialization metadata; the export named is the run's own.
    assert meta["levanter_validation/quickstart-test/bpb"] == pytest.approx(lev["bpb,none"])
    assert meta["marin_docstring_mc/acc"] == pytest.approx(results["marin_docstring_mc"]["acc,none"])
    assert meta["hf_export"].startswith(quickstart_run["paths"]["checkpoints"])
    # Both evaluators ran (side by side, each in its own subprocess with its own log).
    assert meta["lm_eval_s"] > 0 and meta["levanter_eval_s"] > 0
    for log in ("lm_eval.log", "levanter_eval.log"):
        assert os.path.getsize(os.path.join(out, log)) > 0, log


def test_second_run_is_fully_cached(quickstart_run):
    from marin_assets.execution.runner import run_steps

    report = run_steps(quickstart_run["steps"], quickstart_run["prefix"])
    assert {o.action for o in report.outcomes} == {"cached"}
    assert len(report.outcomes) == len(quickstart_run["paths"])
