"""Training killed with SIGKILL resumes from its last checkpoint in the same output path."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_sigkilled_training_resumes_from_checkpoint(quickstart_run, tmp_path):
    from marin_assets.training.levanter_train import (
        LlamaModelConfig,
        SimpleTrainConfig,
        TrainConfig,
        build_levanter_config,
        launch_training,
        levanter_config_yaml,
        list_step_dirs,
        parse_metrics,
        run_training,
        write_reference_checkpoint,
    )

    out = str(tmp_path / "run")
    config = TrainConfig(
        output_path=out,
        components={"data": quickstart_run["paths"]["tokenized"]},
        weights={"data": 1.0},
        model=LlamaModelConfig(
            seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, num_kv_heads=2
        ),
        train=SimpleTrainConfig(
            train_batch_size=8, num_train_steps=120, steps_per_checkpoint=5, steps_per_eval=1000, max_eval_batches=1
        ),
    )
    lev = build_levanter_config(config)
    write_reference_checkpoint(lev.model.reference_checkpoint, config.model, lev.data.tokenizer)
    yaml_path = str(tmp_path / "cfg.yaml")
    with open(yaml_path, "w") as handle:
        handle.write(levanter_config_yaml(lev))
    proc = launch_training(config, yaml_path, os.path.join(out, "train.log"))
    deadline = time.monotonic() + 240
    try:
        while not list_step_dirs(os.path.join(out, "checkpoints")):
            assert proc.poll() is None, "training ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.5)
        time.sleep(1.0)  # let the checkpoint's metadata land
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_at = list_step_dirs(os.path.join(out, "checkpoints"))[-1][0]
    assert 0 < killed_at < 120

    # Re-running the step with the same output path picks the run up where it stopped.
    meta = run_training(config)
    assert meta["resumed_from_step"] >= killed_at
    with open(os.path.join(out, "train.log")) as handle:
        log = handle.read()
    assert os.path.basename(meta["hf_export"]) == "step-119"
    # The resumed process trained only the remaining steps: its first logged loss is past the kill.
    second_run = log.split("===== marin: train_lm start")[-1]
    steps, _ = parse_metrics(second_run)
    trained = sorted(s for s, m in steps.items() if "train/loss" in m)
    # A checkpoint being written when SIGKILL hit is incomplete; Levanter then resumes from the
    # previous one (one checkpoint interval = 5 steps earlier) -- never from scratch.
    assert trained and trained[0] >= max(5, killed_at - 5) and trained[-1] == 119
    first_run_steps, _ = parse_metrics(log.split("===== marin: train_lm start")[1])
    assert min(s for s, m in first_run_steps.items() if "train/loss" in m) <= 1
