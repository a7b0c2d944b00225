"""Marin's library names a researcher's scripts import (issue 31), each through a Marin-style script
run unmodified -- import, dry run, a run on local data -- with the results checked against Marin's
behaviour: exact dedup (``deduplication.pipeline`` / ``.exact``), the inference config module,
``default_lm_log_probs``; plus ``default_key_evals`` and the TPU presets, ``experiments.llama.LlamaConfig``
and the older ``experiments.defaults`` names."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest

from tests.conformance.marin_import import SCRIPTS, alias_env, recorded_paths, run_unmodified, summary


def marin_hash(version: dict) -> str:
    """Marin: ``hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]``."""
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


def write_docs(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / name, "wt") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def read_attributes(folder: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(folder.rglob("*.jsonl.gz")):
        with gzip.open(path, "rt") as handle:
            for line in handle:
                record = json.loads(line)
                out[record["id"]] = record["attributes"]
    return out


GRAY = "Gray climbing specialists ascend vegetation.\nThey perch on elevated branches."
DOCS_0 = [
    {"id": "dup_1", "text": GRAY},
    {"id": "dup_2", "text": GRAY},
    {"id": "unique_1", "text": "Desert mammals possess oversized pinnae."},
]
DOCS_1 = [
    {"id": "dup_3", "text": GRAY},
    {"id": "partial", "text": "Gray climbing specialists ascend vegetation.\nUnlike crimson variants, they hide."},
]


def _script(tmp_path: Path, name: str) -> Path:
    target = tmp_path / f"{name}.py"
    shutil.copy(SCRIPTS / f"{name}.py", target)
    return target


def test_dedup_pipeline_and_exact_names_run_as_in_marin(tmp_path, prefix):
    write_docs(tmp_path / "local_docs", "shard_0.jsonl.gz", DOCS_0)
    write_docs(tmp_path / "local_docs", "shard_1.jsonl.gz", DOCS_1)
    env = alias_env(tmp_path)
    script = _script(tmp_path, "dedup_pipeline")
    dry = run_unmodified(script, prefix, "--dry_run", "true", cwd=str(tmp_path), env=env)
    assert dry.returncode == 0, dry.stderr[-3000:]
    doc_version = {"name": "dedup/exact-doc", "config": {"mode": "exact_doc_deduplicate"}, "dependencies": []}
    assert f"dedup/exact-doc-{marin_hash(doc_version)}" in dry.stdout
    run = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert summary(run)["ran"] == 3
    paths = recorded_paths(prefix)
    docs = read_attributes(Path(prefix, paths["dedup/exact-doc"][0], "data"))
    assert docs["unique_1"]["is_duplicate"] is False
    assert [docs[d]["is_duplicate"] for d in ("dup_1", "dup_2", "dup_3")] == [False, True, True]  # one canonical
    assert Path(prefix, paths["dedup/exact-doc"][0], "data", "shard_1.jsonl.gz").exists()  # Marin's layout
    paragraphs = read_attributes(Path(prefix, paths["dedup/paragraph"][0], "data"))
    assert paragraphs["dup_1"]["duplicate_text"] == []
    assert len(paragraphs["dup_2"]["duplicate_text"]) == 2 and len(paragraphs["dup_3"]["duplicate_text"]) == 2
    (span,) = paragraphs["partial"]["duplicate_text"]
    assert span == [0, len("Gray climbing specialists ascend vegetation."), 1.0]
    assert paragraphs["unique_1"]["duplicate_text"] == []
    exact = read_attributes(Path(prefix, paths["dedup/exact-paragraph"][0], "data"))
    assert exact["partial"]["exact_paragraph"] == [span]
    again = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert (summary(again)["ran"], summary(again)["cached"]) == (0, 3)


def test_inference_config_module_names_run_inference(tmp_path, prefix):
    hq = [
        {"id": f"hq-{i}", "text": f"The theorem follows from the lemma by induction on n, case {i}."} for i in range(30)
    ]
    lq = [{"id": f"lq-{i}", "text": f"click here buy now cheap deals free offer number {i}!!!"} for i in range(30)]
    write_docs(tmp_path / "local_docs" / "hq", "part-0.jsonl.gz", hq)
    write_docs(tmp_path / "local_docs" / "lq", "part-0.jsonl.gz", lq)
    from marin_assets.processing.classification import inference
    from marin_assets.processing.classification.config import inference_config

    assert inference_config.InferenceConfig is inference.InferenceConfig  # one class under both names
    run = run_unmodified(_script(tmp_path, "inference_config"), prefix, cwd=str(tmp_path), env=alias_env(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    scores = read_attributes(Path(prefix, recorded_paths(prefix)["attributes/tiny-quality"][0]))
    assert len(scores) == 30
    assert set(scores["hq-0"]["tiny-quality"]) == {"__label__hq", "__label__lq"}


def test_key_evals_presets_llama_and_older_default_names(tmp_path, prefix):
    from experiments import defaults
    from experiments.evals.evals import default_key_evals
    from experiments.evals.resource_configs import SINGLE_TPU_V5p_8, SINGLE_TPU_V5p_8_FULL
    from experiments.llama import LlamaConfig, llama_1_4b

    assert isinstance(llama_1_4b, LlamaConfig) and defaults.llama_1_4b is llama_1_4b
    assert defaults.llama3_tokenizer == "meta-llama/Meta-Llama-3.1-8B"
    assert SINGLE_TPU_V5p_8_FULL.tpu_type == "v5p-8" and SINGLE_TPU_V5p_8_FULL.chip_count == 4
    assert SINGLE_TPU_V5p_8_FULL.include_tpu_head and not SINGLE_TPU_V5p_8.include_tpu_head
    generation, multiple_choice = default_key_evals("checkpoints/run-abc/hf/step-10", SINGLE_TPU_V5p_8_FULL)
    assert generation.name == "evaluation/lm_evaluation_harness/hf_step-10"
    assert multiple_choice.name == "evaluation/lm_evaluation_harness_levanter/lmeval_debug_hf_step-10"
    assert generation.resources is SINGLE_TPU_V5p_8_FULL  # the TPU request goes with the step
    tasks = [t.name for t in multiple_choice.config.evals.value]
    assert tasks == ["mmlu", "mmlu", "truthfulqa_mc2"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_default_lm_log_probs_scores_a_validation_cache(tmp_path, prefix):
    from tests.conformance.test_eval_and_mixture_scripts import texts, write_hf_model, write_tokenizer
    from tests.conformance.test_eval_and_mixture_scripts import write_docs as write_text_docs

    write_text_docs(tmp_path / "local_docs" / "web", texts(60))
    tokenizer = write_tokenizer(tmp_path / "local_tokenizer", texts(100))
    write_hf_model(tmp_path / "local_model", tokenizer)
    run = run_unmodified(
        _script(tmp_path, "log_probs"), prefix, cwd=str(tmp_path), env=alias_env(tmp_path), timeout=800
    )
    assert run.returncode == 0, run.stderr[-4000:]
    paths = recorded_paths(prefix)
    (out,) = paths["analysis/log_probs/local-model"]  # Marin's step name
    assert out.startswith("analysis/log_probs/local-model-")
    results = json.loads(Path(prefix, paths["analysis/log_probs/local-model"][0], "results.json").read_text())
    bpb = results["results"]["levanter_validation/held-out"]["bpb,none"]
    assert math.isfinite(bpb) and bpb > 0


def test_builtin_models_and_prebuilt_caches_are_marins_steps(prefix, capsys):
    from experiments.models import ModelConfig, download_model_step, get_model_local_path
    from experiments.speedrun.prebuilt_caches import fineweb_edu_subcache_10M

    from marin_assets.execution.executor_main import executor_main

    qwen = download_model_step(ModelConfig(hf_repo_id="Qwen/Qwen3-0.6B", hf_revision="c1899de"))
    assert qwen.name == "gcsfuse_mount/models/Qwen--Qwen3-0-6B--c1899de"
    assert get_model_local_path(qwen) == "/opt/gcsfuse_mount/models/Qwen--Qwen3-0-6B--c1899de"
    executor_main(steps=[qwen, fineweb_edu_subcache_10M], argv=["--dry_run", "true", "--prefix", prefix])
    plan = capsys.readouterr().out
    subcache = {
        "name": "tokenized/subcache/fineweb-edu-10M",
        "config": {
            "tokenizer": "stanford-crfm/marin-tokenizer",
            "hf_repo_id": "marin-community/fineweb-edu-pretokenized-10M",
            "hf_revision": None,
        },
        "dependencies": [],
    }
    assert f"/tokenized/subcache/fineweb-edu-10M-{marin_hash(subcache)}" in plan
    assert f"{prefix}/gcsfuse_mount/models/Qwen--Qwen3-0-6B--c1899de " in plan
