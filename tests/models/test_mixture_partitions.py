"""Partitioned (per-drop) tokenization and mixture weights in the generated Levanter config."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass

import pytest

from marin_assets.execution.step import ExecutorStep, this_output_path, this_partition
from marin_assets.execution.storage import join_path

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]

DROP_DOCS = {"d1": 40, "d2": 120}


@dataclass(frozen=True)
class DropDocsConfig:
    output_path: str
    drop: str


def write_drop_docs(config: DropDocsConfig) -> dict:
    """Documents of one drop: a different number of docstring-like texts per drop."""
    os.makedirs(config.output_path, exist_ok=True)
    n = DROP_DOCS[config.drop]
    with gzip.open(join_path(config.output_path, "docs-00000.jsonl.gz"), "wt") as handle:
        for i in range(n):
            handle.write(
                json.dumps({"text": f"Return item {i} of drop {config.drop}. The value is copied first."}) + "\n"
            )
    return {"documents": n}


@pytest.mark.slow
def test_partitioned_tokenize_and_token_weighted_mixture(ray_session, tmp_path, quickstart_run):
    from levanter.main.train_lm import TrainLmConfig

    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.versioning import StepGraph, instantiate_config
    from marin_assets.experiments.defaults import default_tokenize, default_train
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_assets.processing.tokenize import cache_split_stats, lm_mixture_data_config
    from marin_assets.training.levanter_config import build_levanter_config, levanter_config_yaml
    from marin_assets.training.train_config import TINY_LLAMA

    tokenizer_dir = quickstart_run["paths"]["tokenizers"]
    other_cache = quickstart_run["paths"]["tokenized"]
    drops = ExecutorStep(
        name="documents/drops",
        fn=write_drop_docs,
        config=DropDocsConfig(output_path=this_output_path(), drop=this_partition()),
        partitioned_by="drops",
    )
    tokenized = default_tokenize("drops", drops, tokenizer_dir)
    assert tokenized.partitioned_by == "drops"  # follows its input
    prefix = str(tmp_path)
    partitions = {"drops": list(DROP_DOCS)}
    report = run_steps([tokenized], prefix, partitions=partitions)
    assert not report.failed, [o.error for o in report.failed]
    graph = StepGraph([tokenized], prefix, partitions)
    root = graph.resolved(tokenized).output_path
    tokens = {}
    for drop, n in DROP_DOCS.items():
        stats = cache_split_stats(join_path(root, f"{drop}/train"))
        assert stats["finished"] and stats["documents"] == n  # one cache per drop
        tokens[drop] = stats["tokens"]

    mixture = lm_mixture_data_config({"drops": tokenized, "other": other_cache}, {"drops": 0.75, "other": 0.25})
    simple = SimpleTrainConfig(resources=None, train_batch_size=4, num_train_steps=2, learning_rate=1e-3)
    train = default_train("mix", mixture, TINY_LLAMA, simple)
    graph = StepGraph([train], prefix, partitions)
    config = instantiate_config(train.config, graph.resolved(train), None, graph)
    assert config.train_config.data.configs["drops"].cache_dir == [join_path(root, "d1"), join_path(root, "d2")]
    lev = build_levanter_config(config)
    weights = lev.data.train_weights
    assert set(weights) == {"drops-d1", "drops-d2", "other"}
    assert weights["other"] == pytest.approx(0.25)
    # The drops' share is split by token count: drops are concatenated, not re-balanced.
    total = tokens["d1"] + tokens["d2"]
    assert weights["drops-d1"] == pytest.approx(0.75 * tokens["d1"] / total)
    assert weights["drops-d2"] == pytest.approx(0.75 * tokens["d2"] / total)
    assert lev.data.configs["drops-d2"].cache_dir == join_path(root, "d2")
    # The YAML the subprocess reads parses back to the same weights with Levanter's own parser.
    import draccus

    yaml_path = tmp_path / "cfg.yaml"
    yaml_path.write_text(levanter_config_yaml(lev))
    parsed = draccus.parse(config_class=TrainLmConfig, config_path=str(yaml_path), args=[])
    assert parsed.data.train_weights == pytest.approx(weights)
    assert parsed.trainer.checkpointer.base_path == join_path(config.output_path, "checkpoints")

    # A new drop adds one partition: the consumer's version (output path) changes.
    graph3 = StepGraph([train], prefix, {"drops": ["d1", "d2", "d3"]})
    assert graph3.resolved(train).output_path != graph.resolved(train).output_path


def test_mixture_rejects_unknown_and_all_zero_weights():
    from marin_assets.processing.tokenize import lm_mixture_data_config

    with pytest.raises(ValueError, match="unknown"):
        lm_mixture_data_config({"a": "/x"}, {"b": 1.0})
    with pytest.raises(ValueError, match="positive weight"):
        lm_mixture_data_config({"a": "/x"}, {"a": 0.0})
