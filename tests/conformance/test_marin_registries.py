"""A team that copies Marin's ``experiments/`` registries into its folder (``marin_registry/``, see its
README) gets steps that build, hash as Marin's and dry-run with this project's built-ins -- including
``TokenizeConfig(validation_paths=versioned([]))`` from Marin's ``pretraining_datasets/simple.py`` reaching
the built-in ``default_train`` -- and what needs real data fails when it runs, one line saying what.
The model download and the prebuilt cache of the registries are served by a loopback hub and run."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.conformance.hub_server import HubServer
from tests.conformance.marin_import import alias_env, run_unmodified, summary

REGISTRY = Path(__file__).resolve().parent / "marin_registry"


def marin_hash(version: dict) -> str:
    """Marin: ``hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]``."""
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


RAW_FINEWEB_EDU = {"name": "raw/fineweb-edu", "config": {}, "dependencies": []}
TOKENIZED_FINEWEB_EDU = {
    "name": "tokenized/fineweb-edu",
    "config": {
        "train_paths.[0]": "DEP[0]/3c452cb/huggingface.co/datasets/HuggingFaceFW/fineweb-edu/resolve/3c452cb",
        "validation_paths": [],
        "tokenizer": "meta-llama/Meta-Llama-3.1-8B",
    },
    "dependencies": [RAW_FINEWEB_EDU],
}
SUBCACHE_10M = {
    "name": "tokenized/subcache/fineweb-edu-10M",
    "config": {
        "tokenizer": "stanford-crfm/marin-tokenizer",
        "hf_repo_id": "marin-community/fineweb-edu-pretokenized-10M",
        "hf_revision": None,
    },
    "dependencies": [],
}


@pytest.fixture
def team(tmp_path) -> Path:
    repo = tmp_path / "team"
    shutil.copytree(REGISTRY, repo, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    return repo


def _paths(dry_run_stdout: str) -> dict[str, str]:
    """Step name -> output path from the dry run's plan lines (``run   <name>  <path>  (...)``)."""
    out = {}
    for line in dry_run_stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("run", "skip", "wait", "fail"):
            out[parts[1]] = parts[2]
    return out


@pytest.mark.slow  # three runs of a script whose registries import Levanter: a minute and more
@pytest.mark.timeout(900)
def test_marins_registries_build_hash_dry_run_and_run_what_is_served(team, tmp_path, prefix):
    with HubServer() as hub:
        model_commit = hub.add_repo(
            "tiny-org/tiny-model", {"config.json": b'{"model_type": "llama"}', "weights.bin": b"w" * 5000}, "model"
        )
        hub.add_repo(
            "marin-community/fineweb-edu-pretokenized-10M",
            {"train/shard_ledger.json": b'{"is_finished": true}', "train/input_ids/data": b"\0" * 4096},
        )
        env = alias_env(tmp_path, HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", TRANSFORMERS_OFFLINE="0")
        script = team / "experiments" / "exp_registry.py"
        dry = run_unmodified(script, prefix, "--dry_run", "true", cwd=str(team), env=env, timeout=300)
        assert dry.returncode == 0, dry.stderr[-4000:]
        planned = _paths(dry.stdout)
        assert planned["raw/fineweb-edu"].endswith("/raw/fineweb-edu-c2beb4")  # Marin's override_output_path
        assert planned["tokenized/fineweb-edu"].endswith(f"/tokenized/fineweb-edu-{marin_hash(TOKENIZED_FINEWEB_EDU)}")
        assert planned["tokenized/subcache/fineweb-edu-10M"].endswith(f"-{marin_hash(SUBCACHE_10M)}")
        assert planned["tokenized/dolma/wiki"].endswith("/tokenized/dolma/wiki-3a3a5b")
        assert planned["gcsfuse_mount/models/tiny-org--tiny-model--main"].endswith(
            "/gcsfuse_mount/models/tiny-org--tiny-model--main"
        )
        assert "checkpoints/registry-nano-fineweb-edu" in planned and "checkpoints/registry-dclm-1.4b" in planned
        assert any(name.startswith("evaluation/lm_evaluation_harness/") for name in planned)

        served = run_unmodified(
            script, prefix, "--run_only", "gcsfuse_mount/models/tiny-org", "tokenized/subcache/fineweb-edu-10M",
            cwd=str(team), env=env, timeout=300,
        )  # fmt: skip
        assert served.returncode == 0, served.stderr[-4000:]
        assert summary(served)["ran"] == 2
        model = Path(planned["gcsfuse_mount/models/tiny-org--tiny-model--main"])
        assert (model / "weights.bin").read_bytes() == b"w" * 5000
        assert json.loads((model / "provenance.json").read_text())["commit"] == model_commit
        cache = Path(planned["tokenized/subcache/fineweb-edu-10M"])
        assert json.loads((cache / "train" / "shard_ledger.json").read_text()) == {"is_finished": True}

        # Real data this hub does not have: the step fails when it runs, one line saying what.
        missing = run_unmodified(script, prefix, "--run_only", "raw/fineweb-edu$", cwd=str(team), env=env, timeout=300)
    assert missing.returncode == 1
    failed = [line for line in missing.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "raw/fineweb-edu" in failed[0] and "HuggingFaceFW/fineweb-edu" in failed[0], failed
    assert "Traceback" not in missing.stderr
