"""Marin's older ``experiments.dolma.tokenize_dolma`` names (issue 38 item 3) -- ``tokenize_dolma_steps``,
``BASE_DIR_DOLMA``, ``DOLMA_DATASETS``, ``DOLMA_OLMO_MIXTURE_WEIGHTS`` -- imported as Marin's
``442_dolma.py`` and ``dolma_anneal.py`` import them: the steps build under Marin's names, hash by
Marin's rule and dry-run, and a mixture over them is keyed as Marin's."""

from __future__ import annotations

from tests.conftest import marin_hash


def _version(name: str, files: list[str], tokenizer: str) -> dict:
    """What Marin's ``tokenize_dolma_steps`` versions: its three ``versioned`` fields, no dependency."""
    return {
        "name": name,
        "config": {
            "train_paths": [f"gs://marin-us-central2/raw/dolma/v1.7/{file}" for file in files],
            "validation_paths": [],
            "tokenizer": tokenizer,
        },
        "dependencies": [],
    }


def test_tokenize_dolma_steps_build_hash_as_marins_and_dry_run(prefix, capsys):
    from experiments.dolma.tokenize_dolma import (
        BASE_DIR_DOLMA,
        DOLMA_DATASETS,
        DOLMA_OLMO_MIXTURE_WEIGHTS,
        tokenize_dolma_steps,
    )
    from marin.processing.tokenize.data_configs import lm_mixture_data_config

    from marin_assets.execution.executor_main import executor_main

    assert BASE_DIR_DOLMA == "gs://marin-us-central2/raw/dolma/v1.7"
    steps = tokenize_dolma_steps()
    assert set(steps) == {f"dolma/{split}" for split in DOLMA_DATASETS} == set(DOLMA_OLMO_MIXTURE_WEIGHTS)
    neox = tokenize_dolma_steps(base_path="tokenized/neox/", tokenizer="EleutherAI/gpt-neox-20b")
    assert neox["dolma/wiki"].name == "tokenized/neox/dolma/wiki"
    chosen = {"wiki": steps["dolma/wiki"], "cc-news": steps["dolma/cc-news"], "neox-wiki": neox["dolma/wiki"]}
    executor_main(steps=list(chosen.values()), argv=["--dry_run", "true", "--prefix", prefix])
    plan = capsys.readouterr().out
    expected = {
        "wiki": _version("tokenized/dolma/wiki", DOLMA_DATASETS["wiki"], "meta-llama/Meta-Llama-3.1-8B"),
        "cc-news": _version("tokenized/dolma/cc-news", DOLMA_DATASETS["cc-news"], "meta-llama/Meta-Llama-3.1-8B"),
        "neox-wiki": _version("tokenized/neox/dolma/wiki", DOLMA_DATASETS["wiki"], "EleutherAI/gpt-neox-20b"),
    }
    for key, version in expected.items():
        assert f"{prefix}/{version['name']}-{marin_hash(version)} " in plan, (key, plan)
    # Marin's 442_dolma.py: a mixture of every split, weighted by the OLMo weights, keyed as the steps.
    mixture = lm_mixture_data_config(components=steps, weights=DOLMA_OLMO_MIXTURE_WEIGHTS)
    assert set(mixture.configs) == set(steps) and mixture.train_weights == DOLMA_OLMO_MIXTURE_WEIGHTS
