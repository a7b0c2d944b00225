"""A training subprocess is stopped when it makes no progress, never for running long (issue 35 item 1)."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.timeout(60)

# Writes a line every 0.2 s for ``total`` seconds, then (``stall``) goes silent while still running.
SCRIPT = """
import sys, time
total, stall = float(sys.argv[1]), sys.argv[2] == "stall"
start = time.monotonic()
while time.monotonic() - start < total:
    print("step", round(time.monotonic() - start, 2), flush=True)
    time.sleep(0.2)
if stall:
    time.sleep(600)
"""


def _run(tmp_path, mode: str, total: float, stall_timeout_s: float):
    from marin_assets.training import subprocess_runner

    log = str(tmp_path / f"{mode}.log")
    proc = subprocess_runner.start([sys.executable, "-c", SCRIPT, str(total), mode], log, {}, label="train")
    return proc, subprocess_runner.wait(proc, None, stall_timeout_s=stall_timeout_s)


def test_a_stalled_subprocess_is_stopped_with_a_one_line_cause(tmp_path):
    from marin_assets.training.subprocess_runner import NoProgressError

    with pytest.raises(NoProgressError) as caught:
        proc, _ = _run(tmp_path, "stall", total=0.5, stall_timeout_s=1.5)
    message = str(caught.value)
    assert "\n" not in message and "no progress for" in message and "limit 1.5 s" in message
    assert str(tmp_path / "stall.log") in message


def test_a_progressing_subprocess_runs_past_the_progress_timeout(tmp_path):
    # Runs 3 s, twice the stall limit, writing all the time: it finishes on its own.
    proc, rc = _run(tmp_path, "run", total=3.0, stall_timeout_s=1.5)
    assert rc == 0
    assert len((tmp_path / "run.log").read_text().splitlines()) >= 10


def test_progress_timeout_comes_from_the_config_or_the_environment(monkeypatch):
    from marin_assets.training.device_defaults import (
        DEFAULT_PROGRESS_TIMEOUT_S,
        PROGRESS_TIMEOUT_ENV,
        progress_timeout_s,
    )

    monkeypatch.delenv(PROGRESS_TIMEOUT_ENV, raising=False)
    assert progress_timeout_s(None) == DEFAULT_PROGRESS_TIMEOUT_S
    assert progress_timeout_s(30) == 30 and progress_timeout_s(0) is None
    monkeypatch.setenv(PROGRESS_TIMEOUT_ENV, "86400")
    assert progress_timeout_s(30) == 86400
    monkeypatch.setenv(PROGRESS_TIMEOUT_ENV, "soon")
    with pytest.raises(ValueError, match=PROGRESS_TIMEOUT_ENV):
        progress_timeout_s(None)


def test_default_train_carries_the_progress_timeout_without_changing_the_version():
    from marin_assets.execution.step import versioned
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.defaults import default_tokenize, default_train
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_assets.training.train_config import TINY_LLAMA
    from marin_resources import CpuOnlyConfig

    tokenized = default_tokenize("docs", "/data/docs", "/data/tok")

    def step(**extra):
        config = SimpleTrainConfig(
            resources=CpuOnlyConfig(), train_batch_size=4, num_train_steps=3, learning_rate=1e-3, **extra
        )
        return default_train("t", tokenized, versioned(TINY_LLAMA), config, eval_harness_tasks=())

    plain = step()
    tuned = step(progress_timeout_s=600.0, mp="p=f32,c=bfloat16", model_axis_size=2, xla_flags=("--xla_x=1",))
    assert tuned.config.progress_timeout_s == 600.0 and plain.config.progress_timeout_s is None

    def path(s):
        return StepGraph([s], "/prefix").resolved(s).output_path

    assert path(plain) == path(tuned)  # speed knobs are not part of the version
