"""Real downloads through ``huggingface_hub``'s client, against a hub-compatible server on loopback
(``tests/conformance/hub_server.py``, ``HF_ENDPOINT``) -- never the internet.

* ``download_hf`` streams a revision into the output (globs, ``append_sha_to_path``, sha256 and
  provenance), resumes a dropped connection and an earlier attempt's partial file with ``Range``,
  and writes into ``gs://`` the same way;
* a tokenizer name is fetched into the hub mirror and served from there once the hub is gone;
* ``HF_HUB_OFFLINE=1`` reads only the local cache (no request reaches the hub);
* an unreachable hub fails within seconds, one line naming the host;
* an lm-eval task whose code imports a missing optional package names the package to install;
* (slow) a Marin-style script fetches a dataset, a tokenizer and an lm-eval task's data from the
  hub, and its second run is served from the output prefix without the server.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
from pathlib import Path

import pytest

from tests.conformance.hub_server import HubServer
from tests.conformance.marin_import import SCRIPTS, alias_env, recorded_paths, run_unmodified, summary


def _content(seed: int, size: int) -> bytes:
    """About ``size`` bytes of whole JSON lines."""
    line = json.dumps({"id": f"doc-{seed}", "text": f"document {seed} " + "lorem ipsum " * 40}).encode() + b"\n"
    return line * max(1, size // len(line))


@pytest.fixture
def hub(monkeypatch):
    """The loopback hub, with the process pointed at it and allowed online."""
    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    yield server
    server.stop()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_download_hf_streams_a_revision_with_globs_hashes_and_resume(hub, tmp_path):
    from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf

    files = {
        "data/a.jsonl": _content(1, 1_200_000),
        "data/b.jsonl": _content(2, 900_000),
        "data/c.jsonl": _content(3, 300),
        "notes/readme.txt": b"not wanted",
    }
    commit = hub.add_repo("tiny-org/tiny-web", files)
    out = tmp_path / "raw"
    # An earlier attempt left half of b.jsonl; this one resumes it with a Range request.
    partial = out / "main" / ".download" / "partial" / "data" / "b.jsonl"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(files["data/b.jsonl"][:500_000])
    hub.cut_after = 600_000  # and the first transfer breaks off mid-file
    meta = download_hf(
        DownloadConfig(
            "tiny-org/tiny-web",
            "main",
            hf_urls_glob=["data/*.jsonl"],
            gcs_output_path=str(out),
            append_sha_to_path=True,
            max_streams=1,
        )
    )
    assert (meta["commit"], meta["files"]) == (commit, 3)
    root = out / "main"
    for name in ("data/a.jsonl", "data/b.jsonl", "data/c.jsonl"):
        assert (root / name).read_bytes() == files[name]
    assert not (root / "notes").exists() and not (root / ".download").exists()
    provenance = json.loads((root / "provenance.json").read_text())
    assert provenance["commit"] == commit and provenance["snapshot"].startswith(hub.url)
    assert {f["path"]: f["sha256"] for f in provenance["files"]} == {
        n: hashlib.sha256(files[n]).hexdigest() for n in ("data/a.jsonl", "data/b.jsonl", "data/c.jsonl")
    }
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["revision"] == commit and len(manifest["files"]) == 3
    ranges = [r for _, path, r in hub.requests if r]
    assert "bytes=500000-" in ranges  # the partial file resumed
    assert any(r.startswith("bytes=") and r != "bytes=500000-" for r in ranges)  # the broken transfer resumed
    a_gets = [p for p in hub.files_requested() if p.endswith("data/a.jsonl")]
    assert len(a_gets) == 2


def test_download_hf_writes_into_gcs(hub, gcs_prefix):
    import fsspec

    from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf

    files = {f"data/part-{i}.jsonl": _content(i, 200_000 + i) for i in range(4)}
    hub.add_repo("tiny-org/gcs-web", files)
    out = f"{gcs_prefix}/raw/gcs-web"
    meta = download_hf(DownloadConfig("tiny-org/gcs-web", "main", gcs_output_path=out))
    assert meta["files"] == 4
    fs, _ = fsspec.core.url_to_fs(out)
    for name, data in files.items():
        assert fs.cat(f"{out}/{name}") == data
    provenance = json.loads(fs.cat(f"{out}/provenance.json"))
    assert {f["path"]: f["sha256"] for f in provenance["files"]} == {
        n: hashlib.sha256(d).hexdigest() for n, d in files.items()
    }
    assert not fs.exists(f"{out}/.download")


def test_offline_reads_only_the_local_cache(hub, tmp_path, monkeypatch):
    from marin_assets.download.huggingface.download_hf import DownloadConfig, HfDatasetNotCachedError, download_hf

    hub.add_repo("tiny-org/tiny-web", {"data/a.jsonl": b"{}\n"})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HfDatasetNotCachedError, match="not in the local Hugging Face cache") as err:
        download_hf(
            DownloadConfig("tiny-org/tiny-web", "main", gcs_output_path=str(tmp_path / "o"), cache_dir=str(tmp_path))
        )
    assert "HF_HUB_OFFLINE=1" in str(err.value)
    assert hub.requests == []


def test_an_unreachable_hub_fails_within_seconds_naming_the_host(tmp_path, monkeypatch):
    from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
    from marin_assets.download.huggingface.hub import HubUnreachableError

    port = _closed_port()
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    start = time.monotonic()
    with pytest.raises(HubUnreachableError) as err:
        download_hf(
            DownloadConfig("tiny-org/nowhere", "main", gcs_output_path=str(tmp_path / "o"), cache_dir=str(tmp_path))
        )
    assert time.monotonic() - start < 10
    message = str(err.value)
    assert "\n" not in message
    assert f"127.0.0.1:{port}" in message and "tiny-org/nowhere" in message and "HF_HUB_OFFLINE=1" in message

    from marin_assets.processing.tokenize.tokenize import resolve_tokenizer

    monkeypatch.setenv("MARIN_HF_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    start = time.monotonic()
    with pytest.raises(HubUnreachableError, match=f"127.0.0.1:{port}.*tokenizer 'tiny-org/no-tok'"):
        resolve_tokenizer("tiny-org/no-tok")
    assert time.monotonic() - start < 10


def _write_tokenizer(path: Path):
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    texts = [" ".join(words[(i + j) % len(words)] for j in range(30)) for i in range(60)]
    tokenizer = build_fast_tokenizer(texts, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(path)
    return tokenizer


def _folder_files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_tokenizer_name_is_fetched_into_the_mirror_and_served_from_it(hub, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from marin_assets.processing.tokenize.tokenize import resolve_tokenizer

    _write_tokenizer(tmp_path / "tok")
    tok_files = _folder_files(tmp_path / "tok")
    tok_files["model.safetensors"] = b"weights are not fetched for a tokenizer" * 100
    commit = hub.add_repo("tiny-org/tiny-tok", tok_files, repo_type="model")
    monkeypatch.setenv("MARIN_HF_MIRROR", str(tmp_path / "mirror"))
    folder = resolve_tokenizer("tiny-org/tiny-tok")
    assert folder == str(tmp_path / "mirror" / "models" / "tiny-org" / "tiny-tok" / commit)
    assert not Path(folder, "model.safetensors").exists()
    assert AutoTokenizer.from_pretrained(folder).encode("alpha beta")
    hub.stop()
    served = len(hub.requests)
    assert resolve_tokenizer("tiny-org/tiny-tok") == folder  # from the mirror, the hub is gone
    assert len(hub.requests) == served


def test_a_dataset_id_is_read_through_the_mirror(hub, tmp_path, monkeypatch):
    from marin_assets.processing.tokenize.tokenize import HfDatasetSpec, hf_dataset_records

    rows = "".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(5)).encode()
    hub.add_repo("tiny-org/rows", {"data/train.jsonl": rows})
    monkeypatch.setenv("MARIN_HF_MIRROR", str(tmp_path / "mirror"))
    assert [r["text"] for r in hf_dataset_records(HfDatasetSpec("tiny-org/rows"))] == [f"row {i}" for i in range(5)]
    hub.stop()
    assert len(list(hf_dataset_records(HfDatasetSpec("tiny-org/rows")))) == 5  # the mirror, no hub


def test_a_task_missing_an_optional_package_names_it(tmp_path):
    from marin_assets.eval_data.lm_eval_main import load_tasks, task_manager
    from marin_assets.eval_data.task_data import missing_message

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "utils.py").write_text("import wonderwords\n\n\ndef process_docs(dataset):\n    return dataset\n")
    (tasks / "data.jsonl").write_text(json.dumps({"context": "a", "choices": ["b", "c"], "label": 0}) + "\n")
    (tasks / "words.yaml").write_text(
        "task: needs_wonderwords\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {tasks / 'data.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        "process_docs: !function utils.process_docs\n"
        'doc_to_text: "{{context}}"\ndoc_to_choice: "{{choices}}"\ndoc_to_target: "{{label}}"\n'
    )
    manager = task_manager(str(tasks), ["needs_wonderwords"])
    built, missing = load_tasks([{"task": "needs_wonderwords", "num_fewshot": 0}], manager)
    assert built == [] and missing[0]["package"] == "wonderwords"
    message = missing_message(missing)
    assert "pip install wonderwords" in message and "load_dataset" not in message


TASK_YAML = """task: tiny_hub_mc
dataset_path: tiny-org/tiny-task
test_split: test
output_type: multiple_choice
doc_to_text: "{{context}}"
target_delimiter: " "
doc_to_choice: "{{choices}}"
doc_to_target: "{{label}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_dataset_tokenizer_and_task_from_the_hub_then_from_the_prefix(tmp_path, prefix):
    from tests.conformance.test_eval_and_mixture_scripts import write_hf_model

    work = tmp_path / "work"
    work.mkdir()
    tokenizer = _write_tokenizer(tmp_path / "tok")
    write_hf_model(work / "local_model", tokenizer)
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tiny_hub_mc.yaml").write_text(TASK_YAML)
    words = ["alpha", "beta", "gamma", "delta"]
    task_rows = [
        {
            "context": f"{words[i % 4]} {words[(i + 1) % 4]}",
            "choices": [words[(i + 2) % 4], words[(i + 3) % 4]],
            "label": 0,
        }
        for i in range(8)
    ]
    with HubServer() as hub:
        hub.add_repo("tiny-org/tiny-web", {f"data/part-{i}.jsonl": _content(i, 50_000) for i in range(3)})
        hub.add_repo("tiny-org/tiny-tok", _folder_files(tmp_path / "tok"), repo_type="model")
        hub.add_repo("tiny-org/tiny-task", {"test.jsonl": "".join(json.dumps(r) + "\n" for r in task_rows).encode()})
        env = alias_env(
            tmp_path,
            HF_ENDPOINT=hub.url,
            HF_HUB_OFFLINE="0",
            TRANSFORMERS_OFFLINE="0",
            HF_HUB_CACHE=str(tmp_path / "empty-cache"),
            MARIN_EVAL_TASKS_PATH=str(tmp_path / "tasks"),
        )
        first = run_unmodified(SCRIPTS / "hub_fetch.py", prefix, cwd=str(work), env=env, timeout=600)
        assert first.returncode == 0, first.stderr[-4000:]
        assert summary(first)["ran"] == 3
        fetched = hub.files_requested()
    assert any("tiny-web/resolve" in p for p in fetched)
    assert any("tiny-tok/resolve" in p for p in fetched)
    assert any("tiny-task/resolve" in p for p in fetched)
    paths = recorded_paths(prefix)
    raw = Path(prefix, paths["raw/tiny-web"][0])
    assert sorted(p.name for p in (raw / "data").iterdir()) == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"]
    assert Path(prefix, "hf", "models", "tiny-org", "tiny-tok").is_dir()
    assert Path(prefix, "hf", "datasets", "tiny-org", "tiny-task").is_dir()
    (eval_name,) = [n for n in paths if n.startswith("evaluation/")]
    results = json.loads(Path(prefix, paths[eval_name][0], "results.json").read_text())["results"]
    assert 0.0 <= results["tiny_hub_mc"]["acc,none"] <= 1.0

    # The server is gone: the same steps are cached, and changed ones (another sample count, another
    # eval size) read the tokenizer and the task data from the prefix's mirror.
    again = run_unmodified(
        SCRIPTS / "hub_fetch.py",
        prefix,
        cwd=str(work),
        env={**env, "TINY_SAMPLES": "20", "TINY_EVAL": "3"},
        timeout=600,
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert (summary(again)["ran"], summary(again)["cached"]) == (2, 1)

    # A dataset the prefix does not hold, with the hub gone: the step fails within seconds, one line
    # naming the step and the host.
    start = time.monotonic()
    missing = run_unmodified(
        SCRIPTS / "hub_fetch.py", prefix, cwd=str(work), env={**env, "TINY_DATASET": "tiny-org/elsewhere"}, timeout=300
    )
    assert missing.returncode == 1
    host = hub.url.removeprefix("http://")
    (line,) = [ln for ln in missing.stderr.splitlines() if "is unreachable" in ln and "FAILED" in ln]
    assert "raw/elsewhere" in line and host in line, line
    assert time.monotonic() - start < 120  # interpreter and imports included; the hub check is seconds


def _tiny_task_rows() -> list[dict]:
    words = ["alpha", "beta", "gamma", "delta"]
    return [
        {
            "context": f"{words[i % 4]} {words[(i + 1) % 4]}",
            "choices": [words[(i + 2) % 4], words[(i + 3) % 4]],
            "label": 0,
        }
        for i in range(8)
    ]


def test_in_training_eval_task_data_is_fetched_from_the_hub_into_the_mirror(hub, tmp_path, monkeypatch):
    """Training's subprocess runs offline; its parent, online, lets it fetch a missing task's data."""
    import levanter.eval_harness
    import lm_eval.tasks

    from marin_assets.eval_data.task_data import HUB_FETCH_ENV
    from marin_assets.training.eval_harness import check_harness_tasks, use_local_tasks
    from marin_assets.training.training import training_env

    hub.add_repo(
        "tiny-org/tiny-task", {"test.jsonl": "".join(json.dumps(r) + "\n" for r in _tiny_task_rows()).encode()}
    )
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "tiny_hub_mc.yaml").write_text(TASK_YAML)
    monkeypatch.setenv("MARIN_EVAL_TASKS_PATH", str(tmp_path / "tasks"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("MARIN_HF_MIRROR", str(tmp_path / "mirror"))
    env = training_env()
    assert (
        env[HUB_FETCH_ENV] == "1"
        and env["HF_HUB_OFFLINE"] == "1"
        and env["MARIN_HF_MIRROR"] == str(tmp_path / "mirror")
    )
    # From here on, this process is the training subprocess.
    for name in (HUB_FETCH_ENV, "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(name, env[name])
    for module, name in ((lm_eval.tasks, "TaskManager"), (lm_eval.tasks, "get_task_dict")):
        monkeypatch.setattr(module, name, getattr(module, name))  # undone after the test
    monkeypatch.setattr(levanter.eval_harness, "_compute_averages", levanter.eval_harness._compute_averages)

    manager, fetched = check_harness_tasks([{"task": "tiny_hub_mc", "num_fewshot": 0}], str(tmp_path / "train.yaml"))
    assert list(fetched) == ["tiny_hub_mc"] and fetched["tiny_hub_mc"].startswith(str(tmp_path / "mirror"))
    assert any("tiny-task/resolve" in p for p in hub.files_requested())
    use_local_tasks(manager, fetched)
    # Levanter's harness builds the task by name, offline: it reads the mirror's copy.
    (task,) = lm_eval.tasks.get_task_dict([{"task": "tiny_hub_mc", "num_fewshot": 0}]).values()
    assert len(list(task.test_docs())) == 8

    # Without the parent's word (it ran with HF_HUB_OFFLINE=1) nothing is fetched: the task is missing.
    monkeypatch.delenv(HUB_FETCH_ENV)
    monkeypatch.setenv("MARIN_HF_MIRROR", str(tmp_path / "other-mirror"))
    from marin_assets.eval_data.task_data import TaskDataMissing

    with pytest.raises(TaskDataMissing, match="tiny_hub_mc"):
        check_harness_tasks([{"task": "tiny_hub_mc", "num_fewshot": 0}], str(tmp_path / "train2.yaml"))
