"""Versioned values wherever Marin puts them -- lists, dicts, dataclasses, ``None`` -- are accepted by the
built-in defaults at definition time and keep Marin's hashes (issue 31.3): Marin's
``pretraining_datasets/simple.py`` shape (``TokenizeConfig(validation_paths=versioned([]))``) into
``default_train`` and ``lm_mixture_data_config``, versioned train-config fields and flags, versioned
evals and limits in ``default_eval``."""

from __future__ import annotations

import hashlib
import json

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.executor_main import executor_main
from marin_assets.execution.step import ExecutorStep, this_output_path, unwrap_versioned_value, versioned
from marin_assets.experiments.defaults import default_train
from marin_assets.experiments.evals.evals import default_eval
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.processing.tokenize import TokenizeConfig, lm_mixture_data_config, tokenize
from marin_assets.training.train_config import LlamaModelConfig
from marin_resources import ResourceConfig


def marin_hash(version: dict) -> str:
    """Marin: ``hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]``."""
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


def _plan(steps, prefix, capsys) -> dict[str, str]:
    executor_main(steps=steps, argv=["--dry_run", "true", "--prefix", prefix])
    out = {}
    for line in capsys.readouterr().out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "run":
            out[parts[1]] = parts[2]
    return out


def _registry_steps():
    raw = ExecutorStep(
        name="raw/tiny-web",
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id="tiny-org/tiny-web", revision="abc1234", gcs_output_path=this_output_path()
        ),
        override_output_path="raw/tiny-web-000000",
    ).cd("abc1234")
    tokenized = ExecutorStep(
        name="tokenized/tiny-web",
        fn=tokenize,
        config=TokenizeConfig(
            train_paths=[raw],
            validation_paths=versioned([]),
            cache_path=this_output_path(),
            tokenizer=versioned("tiny-org/tiny-tok"),
            tags=versioned({"source": "web"}),  # a dict
            sample_count=versioned(None),  # None
        ),
    )
    return raw, tokenized


def test_versioned_lists_dicts_dataclasses_and_none_in_the_builtins(prefix, capsys):
    _, tokenized = _registry_steps()
    model = versioned(LlamaModelConfig(seq_len=64, hidden_dim=16, intermediate_dim=32, num_heads=2, num_layers=1))
    train = default_train(
        "tiny",
        tokenized,
        model,
        SimpleTrainConfig(
            resources=ResourceConfig.with_cpu(),
            train_batch_size=versioned(4),
            num_train_steps=versioned(2),
            learning_rate=versioned(1e-3),
            steps_per_hf_export=versioned(None),
            initialize_from_hf=versioned(None),
        ),
        eval_harness_tasks=(),
    )
    mixture = lm_mixture_data_config(components={"web": tokenized}, weights={"web": 1.0})
    assert unwrap_versioned_value(mixture.configs["web"].validation_urls) == []
    evaluation = default_eval(
        "local_model", evals=versioned(["marin_docstring_mc"]), max_eval_instances=versioned(4), name="tiny-eval"
    )
    planned = _plan([train, evaluation], prefix, capsys)
    version = {
        "name": "tokenized/tiny-web",
        "config": {
            "train_paths.[0]": "DEP[0]/abc1234",
            "validation_paths": [],
            "tokenizer": "tiny-org/tiny-tok",
            "tags": {"source": "web"},
            "sample_count": None,
        },
        "dependencies": [{"name": "raw/tiny-web", "config": {}, "dependencies": []}],
    }
    assert planned["tokenized/tiny-web"].endswith(f"/tokenized/tiny-web-{marin_hash(version)}")
    assert "checkpoints/tiny" in planned and "evaluation/tiny-eval" in planned
    # The train step carries the versioned list as Marin's does: editing it changes the train step too.
    spec = train.config.train_config.data.configs["tiny-web"]
    assert unwrap_versioned_value(spec.validation_urls) == [] and spec.validation_urls != []
