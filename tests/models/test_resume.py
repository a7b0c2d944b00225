"""Training killed with SIGKILL resumes from its last checkpoint in the same output path."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


def test_sigkilled_training_resumes_from_checkpoint(quickstart_run, tmp_path):
    from marin_assets.training import levanter_main, subprocess_runner
    from marin_assets.training.train_config import LlamaModelConfig
    from marin_assets.training.training import (
        LmTrainSpec,
        MixtureSpec,
        OptimizerSpec,
        SourceSpec,
        TrainerSpec,
        TrainLmOnPodConfig,
        run_levanter_train_lm,
        training_env,
    )
    from marin_assets.training.training_log import list_step_dirs, parse_metrics

    out = str(tmp_path / "run")
    config = TrainLmOnPodConfig(
        train_config=LmTrainSpec(
            data=MixtureSpec(
                configs={"data": SourceSpec(cache_dir=quickstart_run["paths"]["tokenized"])},
                train_weights={"data": 1.0},
            ),
            trainer=TrainerSpec(
                train_batch_size=8, num_train_steps=120, checkpoint_every=5, steps_per_eval=1000, max_eval_batches=1
            ),
            model=LlamaModelConfig(
                seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, num_kv_heads=2
            ),
            optimizer=OptimizerSpec(learning_rate=3e-3),
            hf_save_steps=120,
        ),
        output_path=out,
    )
    log_path = os.path.join(out, "train.log")
    os.makedirs(out)
    with open(log_path, "w") as handle:
        handle.write("===== marin: train_lm start (killed run) =====\n")
    spec = levanter_main.write_spec(
        str(tmp_path / "spec.pkl"), "marin_assets.training.levanter_config:prepare_training", config
    )
    proc = subprocess_runner.start(levanter_main.command("train", spec), log_path, training_env())
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
    # The last *complete* checkpoint (Levanter's metadata.json): what a resume can start from.
    killed_at = [
        n for n, p in list_step_dirs(os.path.join(out, "checkpoints")) if os.path.exists(f"{p}/metadata.json")
    ][-1]
    assert 0 < killed_at < 120

    # Re-running the step with the same output path picks the run up where it stopped.
    meta = run_levanter_train_lm(config)
    assert meta["resumed_from_step"] == killed_at  # the step Levanter says it resumed from
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
