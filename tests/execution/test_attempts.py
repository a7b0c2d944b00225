"""Attempt staging: what a retry resumes from, what it must not, and where paths point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from marin_assets.execution import ExecutorStep, StepGraph, this_output_path, versioned
from marin_assets.execution.attempt import published_path, staging_path
from marin_assets.execution.lease import StepLease, lease_for_output, process_start_ticks
from marin_assets.execution.outcomes import ExecutorError, ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_assets.execution.status import read_metadata, read_status, write_status_if
from marin_assets.execution.storage import join_path, read_bytes
from tests.published_files import files_naming_a_staging_folder


@dataclass(frozen=True)
class CheckpointConfig:
    output_path: str
    fail_after_checkpoint: bool = False
    steps: int = 3


def train_like(config: CheckpointConfig) -> dict[str, object]:
    """Resume from ``checkpoints/latest`` if present (as Levanter does), then write the result."""
    ckpt = join_path(config.output_path, "checkpoints/latest")
    found = read_bytes(ckpt)
    os.makedirs(os.path.dirname(ckpt), exist_ok=True)
    with open(ckpt, "w") as handle:
        handle.write("step 2")
    if config.fail_after_checkpoint and os.environ.get("FAIL_ONCE") == "1":
        os.environ["FAIL_ONCE"] = "0"
        raise RuntimeError("preempted after a checkpoint")
    with open(join_path(config.output_path, "model.txt"), "w") as handle:
        handle.write("resumed" if found else "from scratch")
    return {"resumed": found is not None, "model": join_path(config.output_path, "model.txt")}


def _step(**kwargs) -> ExecutorStep:
    return ExecutorStep(
        "attempts/train", train_like, CheckpointConfig(this_output_path(), **kwargs, steps=versioned(3))
    )


def test_a_failed_attempt_is_resumed_by_the_retry_and_paths_name_the_output(prefix, monkeypatch):
    monkeypatch.setenv("FAIL_ONCE", "1")
    step = _step(fail_after_checkpoint=True)
    graph = StepGraph([step], prefix)
    out = graph.resolved(step).output_path
    with pytest.raises(ExecutorError):
        StepRunner(ExecutorOptions()).run(graph)
    failed = read_status(out)
    assert failed.status == "FAILED" and failed.attempt
    assert not os.path.exists(join_path(out, "checkpoints"))  # a failed attempt publishes nothing
    assert os.path.exists(join_path(staging_path(out, failed.attempt), "checkpoints/latest"))
    StepRunner(ExecutorOptions(force_run_failed=True)).run(graph)
    assert read_status(out).status == "SUCCESS"
    with open(join_path(out, "model.txt")) as handle:
        assert handle.read() == "resumed"
    metadata = read_metadata(out)
    assert metadata["resumed"] is True and metadata["model"] == join_path(out, "model.txt")
    with open(join_path(out, ".executor_info")) as handle:
        assert json.load(handle)["output_path"] == out
    assert not os.path.exists(os.path.join(os.path.dirname(out), ".marin_attempts"))


def _plant_attempt(out: str, attempt: str, holder_pid: int, heartbeat_age_s: float) -> StepLease:
    """An earlier attempt: RUNNING status naming it, a checkpoint in its staging folder, its lease."""
    lease = lease_for_output(out, heartbeat_s=0.2, stale_s=1.0)
    os.makedirs(out, exist_ok=True)
    assert write_status_if(out, "RUNNING", None, lease.backend, run_id="old", attempt=attempt)
    ckpt = join_path(staging_path(out, attempt), "checkpoints/latest")
    os.makedirs(os.path.dirname(ckpt))
    with open(ckpt, "w") as handle:
        handle.write("step 1")
    content = json.loads(lease._content())
    content.update(pid=holder_pid, heartbeat=time.time() - heartbeat_age_s, start_ticks=process_start_ticks(holder_pid))
    assert lease.backend.create_exclusive(lease.path, json.dumps(content).encode())
    return lease


def test_a_provably_dead_holders_attempt_is_adopted(prefix):
    step = _step()
    graph = StepGraph([step], prefix)
    out = graph.resolved(step).output_path
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _plant_attempt(out, "deadbeef", dead.pid, heartbeat_age_s=0)
    StepRunner(ExecutorOptions(heartbeat_s=0.2, stale_s=1.0)).run(graph)
    assert read_metadata(out)["resumed"] is True


def test_a_stale_but_live_holders_attempt_is_copied_then_discarded_never_adopted_in_place(prefix):
    step = _step()
    graph = StepGraph([step], prefix)
    out = graph.resolved(step).output_path
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _plant_attempt(out, "cafebabe", alive.pid, heartbeat_age_s=30)  # paused or cut off, not dead
        StepRunner(ExecutorOptions(heartbeat_s=0.2, stale_s=1.0)).run(graph)
    finally:
        alive.kill()
        alive.wait()
    assert read_metadata(out)["resumed"] is True  # from a copy of its checkpoint
    assert read_status(out).attempt != "cafebabe"
    assert not os.path.exists(staging_path(out, "cafebabe"))


def test_a_copy_interrupted_mid_way_is_copied_again_by_the_next_runner(prefix):
    step = _step()
    graph = StepGraph([step], prefix)
    out = graph.resolved(step).output_path
    lease = _plant_attempt(out, "cafebabe", os.getpid(), heartbeat_age_s=0)
    # A copier that died after recording what it copies from, leaving half a copy behind.
    status, token = lease.backend.read(join_path(out, ".executor_status"))
    assert write_status_if(out, "RUNNING", token, lease.backend, run_id="copier", copying_from="cafebabe")
    half = join_path(staging_path(out, "0000dead"), "checkpoints/partial")
    os.makedirs(os.path.dirname(half))
    open(half, "w").close()
    os.remove(lease.path)  # the copier released (or lost) its lease
    StepRunner(ExecutorOptions(heartbeat_s=0.2, stale_s=1.0)).run(graph)
    assert read_metadata(out)["resumed"] is True
    assert not os.path.exists(join_path(out, "checkpoints/partial"))
    assert not os.path.exists(os.path.join(os.path.dirname(out), ".marin_attempts"))


def test_published_path_maps_a_staging_folder_back():
    out = "gs://b/marin/dedup/fuzzy-abc/drop-003"
    staging = staging_path(out, "0123abcd")
    assert staging == "gs://b/marin/dedup/fuzzy-abc/.marin_attempts/drop-003/0123abcd/drop-003"
    assert published_path(staging) == out
    assert published_path(join_path(staging, "index/x.npz")) == join_path(out, "index/x.npz")
    assert published_path(out) == out


@dataclass(frozen=True)
class FilesConfig:
    output_path: str
    names: str = versioned("a,b")


def write_names(config: FilesConfig) -> None:
    from marin_assets.execution.storage import atomic_write_text

    for name in os.environ.get("NAMES", "a,b").split(","):
        atomic_write_text(join_path(config.output_path, f"{name}/part.txt"), f"{name} {os.environ.get('TAG')}")


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_publishing_replaces_the_earlier_content_of_an_output(where, prefix, request, monkeypatch):
    from marin_assets.execution.status import status_path
    from marin_assets.execution.storage import filesystem

    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    step = ExecutorStep("attempts/files", write_names, FilesConfig(this_output_path()))
    graph = StepGraph([step], base)
    out = graph.resolved(step).output_path
    monkeypatch.setenv("NAMES", "a,b")
    monkeypatch.setenv("TAG", "first")
    StepRunner(ExecutorOptions()).run(graph)
    fs, p = filesystem(out)
    fs.rm_file(filesystem(status_path(out))[1])  # invalidated: the next run computes it again
    monkeypatch.setenv("NAMES", "a,c")
    monkeypatch.setenv("TAG", "second")
    StepRunner(ExecutorOptions()).run(graph)
    files = sorted(
        f[len(p.rstrip("/")) + 1 :] for f in fs.find(p) if "/.executor_" not in f and "/." not in f[len(p) :]
    )
    assert files == ["a/part.txt", "c/part.txt"]
    assert read_bytes(join_path(out, "a/part.txt")) == b"a second"
    parent_fs, parent = filesystem(out.rsplit("/", 1)[0])
    assert not [f for f in parent_fs.find(parent) if "/.marin_attempts/" in f]


@pytest.mark.slow
@pytest.mark.timeout(1200)  # three Levanter runs on a busy 2-core machine
def test_a_sigkilled_training_step_resumes_from_its_staged_checkpoints(prefix):
    """Through the runner: the killed attempt's checkpoints are in its staging folder; the next
    runner (the holder is provably dead) adopts the folder and Levanter resumes there."""
    import glob
    import signal

    from marin_assets.training.training_log import list_step_dirs
    from tests.execution import resume_steps

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = [sys.executable, "-m", "tests.execution.resume_steps", "--prefix", prefix, "--no_record"]
    env = {**os.environ, "PYTHONPATH": repo}
    runner = subprocess.Popen(cmd, cwd=repo, env=env, start_new_session=True)
    pattern = os.path.join(prefix, "checkpoints", ".marin_attempts", "*", "*", "*", "checkpoints")
    deadline = time.monotonic() + 400
    try:
        while not any(list_step_dirs(d) for d in glob.glob(pattern)):
            assert runner.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint within 400 s"
            time.sleep(0.5)
        time.sleep(1.0)  # let the checkpoint's metadata land
    finally:
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait()
    (staged,) = glob.glob(pattern)
    killed_at = list_step_dirs(staged)[-1][0]
    graph_steps = resume_steps.steps()
    out = StepGraph(graph_steps, prefix).resolved(graph_steps[-1]).output_path
    assert read_status(out).status == "RUNNING" and not os.path.exists(join_path(out, "checkpoints"))

    second = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=500)
    assert second.returncode == 0, second.stderr[-3000:]
    assert read_status(out).status == "SUCCESS"
    metadata = read_metadata(out)
    assert metadata["resumed_from_step"] > 0 and metadata["resumed_from_step"] >= killed_at - 5
    last = list_step_dirs(join_path(out, "checkpoints"))[-1][0]
    assert last >= 115
    assert str(metadata["hf_export"]).startswith(out) and ".marin_attempts" not in json.dumps(metadata)
    # Nothing published names a staging folder, and Levanter resumes from the published config:
    # asked for a few more steps, it loads the published checkpoint and continues from there.
    assert files_naming_a_staging_folder(prefix) == []
    resumed = subprocess.run(
        [sys.executable, "-m", "levanter.main.train_lm", "--config_path", join_path(out, "train_config.yaml"),
         "--trainer.num_train_steps", str(last + 10)],
        cwd=repo, capture_output=True, text=True, timeout=500,
        env={**env, "JAX_PLATFORMS": "cpu", "WANDB_MODE": "disabled"},
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"Loading checkpoint from {join_path(out, 'checkpoints')}/step-{last}\n" in resumed.stdout + resumed.stderr
    # Past the end of the run before: its HF export of the final step lands in the published folder.
    assert list_step_dirs(join_path(out, "hf"))[-1][0] >= last + 5


@dataclass(frozen=True)
class SummaryConfig:
    output_path: str
    size: int = versioned(1)


def write_self_describing(config: SummaryConfig) -> dict[str, str]:
    """Writes files that name its own output path, as Levanter and the stages do."""
    from marin_assets.execution.storage import atomic_write_bytes, atomic_write_text

    out = config.output_path
    atomic_write_text(join_path(out, "train_summary.json"), json.dumps({"checkpoints": [f"{out}/checkpoints/step-1"]}))
    atomic_write_text(join_path(out, "logs/train.log.config.yaml"), f"checkpointer:\n  base_path: {out}/checkpoints\n")
    atomic_write_text(join_path(out, "hf/step-1/config.json"), json.dumps({"_name_or_path": out.split("://")[-1]}))
    atomic_write_bytes(join_path(out, "model.bin"), b"\x00\x01" + out.encode())  # binary: left as written
    return {"hf_export": f"{out}/hf/step-1"}


@pytest.mark.parametrize("where", ["local", "gcs"])
def test_published_text_files_name_the_output_not_the_staging_folder(where, prefix, request):
    from marin_assets.execution.storage import filesystem

    base = prefix if where == "local" else request.getfixturevalue("gcs_prefix")
    step = ExecutorStep("attempts/summary", write_self_describing, SummaryConfig(this_output_path()))
    graph = StepGraph([step], base)
    out = graph.resolved(step).output_path
    StepRunner(ExecutorOptions()).run(graph)
    summary = json.loads(read_bytes(join_path(out, "train_summary.json")))
    assert summary == {"checkpoints": [f"{out}/checkpoints/step-1"]}
    config = read_bytes(join_path(out, "logs/train.log.config.yaml")).decode()
    assert config == f"checkpointer:\n  base_path: {out}/checkpoints\n"
    assert json.loads(read_bytes(join_path(out, "hf/step-1/config.json"))) == {"_name_or_path": out.split("://")[-1]}
    assert read_metadata(out)["hf_export"] == f"{out}/hf/step-1"
    assert json.loads(read_bytes(join_path(out, ".executor_info")))["config"]["output_path"] == out
    assert b".marin_attempts" in read_bytes(join_path(out, "model.bin"))  # binary files are not opened
    fs, p = filesystem(out)
    texts = [f for f in fs.find(p) if not f.endswith(".bin")]
    assert len(texts) >= 5 and not [f for f in texts if b".marin_attempts" in fs.cat_file(f)]
