"""Datasets and tokenizers by Hugging Face name resolve from the local cache only, with clear errors;
Marin's resource configs; Marin's JSON-lines status files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marin_assets.execution.status import read_status
from marin_resources import CpuOnlyConfig, GpuConfig, TpuPodConfig, remove_tpu_lockfile_on_exit
from tests.conformance.marin_import import REPO

SNAPSHOT = "a" * 40


def hub_snapshot(hf_home: Path, kind: str, repo: str) -> Path:
    """The folder layout ``huggingface-cli download`` leaves in the cache (refs/main -> snapshot)."""
    org, name = repo.split("/")
    root = hf_home / "hub" / f"{kind}--{org}--{name}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(SNAPSHOT)
    snapshot = root / "snapshots" / SNAPSHOT
    snapshot.mkdir(parents=True)
    return snapshot


def run_offline(code: str, hf_home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    env.pop("HF_DATASETS_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=str(REPO),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_hf_names_resolve_from_the_local_cache_or_fail_clearly(tmp_path):
    hf_home = tmp_path / "hf"
    data = hub_snapshot(hf_home, "datasets", "acme/tiny-docs") / "data"
    data.mkdir()
    (data / "train.jsonl").write_text('{"text": "first"}\n{"text": "second"}\n')
    tok = hub_snapshot(hf_home, "models", "acme/tiny-tok")
    (tok / "tokenizer_config.json").write_text("{}")
    proc = run_offline(
        """
        import json
        from marin_assets.processing.tokenize import HfDatasetSpec, hf_dataset_records, resolve_tokenizer
        out = {"rows": [r["text"] for r in hf_dataset_records(HfDatasetSpec("acme/tiny-docs"))],
               "tokenizer": resolve_tokenizer("acme/tiny-tok")}
        for what, call in (("dataset", lambda: list(hf_dataset_records(HfDatasetSpec("acme/absent")))),
                           ("tokenizer", lambda: resolve_tokenizer("acme/absent-tok"))):
            try:
                call()
            except FileNotFoundError as exc:
                out[what + "_error"] = str(exc)
        print(json.dumps(out))
        """,
        hf_home,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rows"] == ["first", "second"]
    assert Path(out["tokenizer"]) == tok
    assert (
        "acme/absent" in out["dataset_error"] and "huggingface-cli download --repo-type dataset" in out["dataset_error"]
    )
    assert "acme/absent-tok" in out["tokenizer_error"] and "local path" in out["tokenizer_error"]


def test_default_tokenize_reads_an_hf_id_or_a_path_as_marin_does(tmp_path, monkeypatch):
    from marin_assets.execution.executor import versioned
    from marin_assets.experiments.defaults import default_tokenize

    monkeypatch.chdir(tmp_path)
    by_id = default_tokenize("docs", "acme/tiny-docs", "acme/tiny-tok", sample_count=10)
    assert by_id.name == "tokenized/docs"
    assert by_id.config.hf_dataset.id == "acme/tiny-docs" and by_id.config.train_paths == []
    assert by_id.config.tokenizer == versioned("acme/tiny-tok") and by_id.config.sample_count == versioned(10)
    (tmp_path / "acme" / "tiny-docs").mkdir(parents=True)  # now an existing path: a folder of documents
    by_path = default_tokenize("docs", "acme/tiny-docs", "tok", is_validation=True)
    assert by_path.config.hf_dataset is None and by_path.config.validation_paths == ["acme/tiny-docs"]


def test_marin_resource_configs():
    cpu = CpuOnlyConfig(num_cpus=2)
    assert cpu.as_remote_kwargs() == {"num_cpus": 2, "runtime_env": {"env_vars": {"JAX_PLATFORMS": "cpu"}}}
    assert cpu.accelerator_descriptor() is None
    gpu = GpuConfig(gpu_count=2, accelerator_type="a100")
    assert gpu.as_remote_kwargs() == {"num_gpus": 2, "runtime_env": {}, "accelerator_type": "A100"}
    positional = TpuPodConfig("v4-8", 2, {"env_vars": {"A": "1"}})  # Marin's field order
    assert (positional.slice_count, dict(positional.runtime_env)) == (2, {"env_vars": {"A": "1"}})
    tpu = TpuPodConfig(tpu_type="v4-8", slice_count=2).with_env_vars(LIBTPU_INIT_ARGS="x")
    assert tpu.accelerator_descriptor() == "v4-8" and tpu.total_device_count() == 8
    assert tpu.as_remote_kwargs()["runtime_env"] == {"env_vars": {"LIBTPU_INIT_ARGS": "x"}}
    with pytest.raises(ValueError):
        TpuPodConfig(tpu_type="v4-7")


def test_remove_tpu_lockfile_on_exit_even_when_the_task_fails(tmp_path):
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    with pytest.raises(RuntimeError), remove_tpu_lockfile_on_exit(str(lockfile)):
        raise RuntimeError("task failed")
    assert not lockfile.exists()
    with remove_tpu_lockfile_on_exit(str(lockfile)):  # absent: nothing to do
        pass


def test_remove_tpu_lockfile_on_exit_is_also_marins_decorator(tmp_path):
    lockfile = tmp_path / "libtpu_lockfile"

    @remove_tpu_lockfile_on_exit(lockfile=str(lockfile))
    def tpu_task(x: int) -> int:
        lockfile.write_text("held")
        return x + 1

    assert tpu_task(1) == 2 and not lockfile.exists() and tpu_task.__name__ == "tpu_task"

    @remove_tpu_lockfile_on_exit
    def plain(x: int) -> int:  # Marin's bare form: the default lockfile
        return x * 2

    assert plain(4) == 8


def test_marins_json_lines_status_files_are_read(tmp_path):
    events = [
        {"date": "2024-09-28T13:29:20.780705", "status": "WAITING", "message": None},
        {"date": "2024-09-28T13:29:21.091470", "status": "RUNNING", "message": None},
        {"date": "2024-09-28T13:29:47.559614", "status": "SUCCESS", "message": None, "ray_task_id": "abc"},
    ]
    (tmp_path / ".executor_status").write_text("".join(json.dumps(e) + "\n" for e in events))
    status = read_status(str(tmp_path))
    assert status is not None and status.status == "SUCCESS" and status.run_id == "abc" and status.time > 0
    (tmp_path / ".executor_status").write_text(json.dumps(events[0]) + "\n")
    assert read_status(str(tmp_path)).status == "RUNNING"  # WAITING: someone is on it
    (tmp_path / ".executor_status").write_text(json.dumps({**events[0], "status": "CANCELLED"}) + "\n")
    assert read_status(str(tmp_path)) is None  # cancelled: run it again


def test_marins_status_module_reads_and_writes_event_logs_the_engine_understands(tmp_path):
    from marin_assets.execution import executor_step_status as marin_status

    out = str(tmp_path / "step-abc123")
    path = marin_status.get_status_path(out)
    marin_status.append_status(path, marin_status.STATUS_WAITING)
    marin_status.append_status(path, marin_status.STATUS_RUNNING, ray_task_id="t1")
    assert read_status(out).status == "RUNNING" and len(Path(path).read_text().splitlines()) == 2
    marin_status.append_status(path, marin_status.STATUS_SUCCESS, ray_task_id="t1")
    events = marin_status.read_events(path)
    assert [e.status for e in events] == ["WAITING", "RUNNING", "SUCCESS"]
    assert marin_status.get_current_status(events) == marin_status.get_latest_status_from_gcs(out) == "SUCCESS"
    assert read_status(out).status == "SUCCESS"
