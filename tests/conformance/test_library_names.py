"""Library names Marin scripts import beyond the executor (issue 25.3), each used as Marin's scripts
use it, under Marin's module names (the import alias), hashes pinned against Marin's rule."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import marin.execution.step as step_module
from marin.core.runtime import TaskConfig, cached_or_construct_output, map_files_in_directory
from marin.download.huggingface.download import DownloadConfig as OldDownloadConfig
from marin.download.huggingface.download_hf import DownloadConfig
from marin.download.huggingface.download_hf import download_hf as _download_hf
from marin.execution import StepContext, StepRef, deferred, output, step, versioned
from marin.execution.executor import ExecutorStep, output_path_of, this_output_path
from marin.processing.classification.inference import TaskConfig as InferenceTaskConfig
from marin.processing.tokenize import (
    HfTokenizeConfig,
    TokenizeConfig,
    TokenizeConfigBase,
    add_validation_sets_to_mixture,
    get_vocab_size_for_tokenizer,
    lm_data_config,
    tokenize,
)
from marin.processing.tokenize.data_configs import mixture_for_evaluation
from marin.utilities.executor_utils import ckpt_path_to_step_name
from marin.utils import fsspec_cpdir, fsspec_get_atomic_directories, fsspec_get_curr_subdirectories

# ``experiments.*`` is imported by Marin's name only in subprocesses (test_import_alias,
# test_team_repo): in this process it would bind ``experiments`` to the built-ins for the whole
# session, and later tests import a project's own ``experiments`` package.
from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.defaults import default_download
from marin_assets.experiments.llama import llama_1_4b_train_config, llama_150m_train_config
from tests.conformance.marin_import import SCRIPTS, alias_env, recorded_paths, run_unmodified
from tests.conformance.test_team_repo import hf_hub  # noqa: F401 - the fixture
from tests.conftest import marin_hash


def output_of(step_: ExecutorStep, prefix: str = "/p") -> str:
    return StepGraph([step_], prefix).resolved(step_).output_path


@dataclass(frozen=True)
class TokenizeCfg:
    train_paths: list
    cache_path: str
    tokenizer: str


def tokenize_fn(config: TokenizeCfg) -> None:
    del config


def test_step_with_a_context_builds_marins_step():
    download = default_download("raw/web", "org/web", versioned("abc1234"))

    @step(name="tokenized/web", fn=tokenize_fn)
    def tokenize_web(ctx: StepContext, tokenizer: str):
        return TokenizeCfg(train_paths=[ctx.require(download) / "train"], cache_path=ctx.output, tokenizer=tokenizer)

    made = tokenize_web(versioned("gpt2"))
    assert isinstance(made, ExecutorStep) and made.fn is tokenize_fn
    by_hand = ExecutorStep(
        name="tokenized/web",
        fn=tokenize_fn,
        config=TokenizeCfg([output_path_of(download.step, "train")], this_output_path(), versioned("gpt2")),
    )
    raw = {"name": "raw/web", "config": {"revision": "abc1234"}, "dependencies": []}
    version = {
        "name": "tokenized/web",
        "config": {"train_paths.[0]": "DEP[0]/train", "tokenizer": "gpt2"},
        "dependencies": [raw],
    }
    assert marin_hash(version) == "ec32dd"
    assert output_of(made) == output_of(by_hand) == "/p/tokenized/web-ec32dd"
    assert StepRef is type(download)


def test_step_with_a_deferred_call_and_the_submodule_both_work():
    download_hf = deferred(_download_hf)

    @step(name="raw/open-web-math")
    def creator():
        return download_hf(
            DownloadConfig("open-web-math/open-web-math", versioned("fde8ef8"), gcs_output_path=output())
        )

    made = creator(override_output_path="raw/open-web-math-fde8ef8")
    assert made.name == "raw/open-web-math" and made.override_output_path == "raw/open-web-math-fde8ef8"
    assert marin_hash({"name": "raw/open-web-math", "config": {"revision": "fde8ef8"}, "dependencies": []}) == "2d9a09"
    assert StepGraph([made], "/p").resolved(made).hash == "2d9a09"
    assert step is step_module and step_module.ExecutorStep is ExecutorStep  # the submodule, callable
    assert OldDownloadConfig is DownloadConfig


def test_step_around_steps_returns_them_unchanged():
    inner = ExecutorStep(name="train/x", fn=tokenize_fn, config=TokenizeCfg([], this_output_path(), versioned("t")))

    @step(name="tutorials/all")
    def run_all():
        return inner

    assert run_all() is inner


def test_core_runtime_maps_files_once(tmp_path):
    assert TaskConfig is InferenceTaskConfig and TaskConfig().max_in_flight == 1000
    src, dst = tmp_path / "in", tmp_path / "out"
    (src / "a").mkdir(parents=True)
    (src / "a" / "1.txt").write_text("one")
    (src / "2.txt").write_text("two")
    calls = []

    @cached_or_construct_output(success_suffix="SUCCESS")
    def upper(input_file: str, output_file: str) -> str:
        calls.append(input_file)
        Path(output_file).write_text(Path(input_file).read_text().upper())
        return output_file

    map_files_in_directory(upper, str(src), "**/*.txt", str(dst))
    assert (dst / "a" / "1.txt").read_text() == "ONE" and (dst / "2.txt").read_text() == "TWO"
    assert json.loads((dst / "2.txt.SUCCESS").read_text())["input_file_path"] == str(src / "2.txt")
    map_files_in_directory(upper, str(src), "**/*.txt", str(dst))
    assert len(calls) == 2  # the second pass found the ledgers


def test_llama_presets():
    assert (llama_1_4b_train_config.train_batch_size, llama_1_4b_train_config.learning_rate) == (1024, 3e-4)
    assert llama_150m_train_config.resources.device.tpu_type == "v4-32"


def test_the_step_decorator_script_runs_unmodified(hf_hub, tmp_path, prefix):  # noqa: F811
    script = tmp_path / "step_decorator.py"
    script.write_text((SCRIPTS / "step_decorator.py").read_text())
    env = alias_env(tmp_path, HF_HUB_CACHE=hf_hub, HF_HUB_OFFLINE="1")
    proc = run_unmodified(script, prefix, cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert recorded_paths(prefix) == {"raw/tiny-web": ["raw/tiny-web-main"]}
    assert os.path.exists(Path(prefix, "raw/tiny-web-main/data/train.jsonl"))


def tokenize_step(name: str, tokenizer: str) -> ExecutorStep:
    config = TokenizeConfig(
        train_paths=["/data/" + name],
        validation_paths=[],
        cache_path=this_output_path(),
        tokenizer=versioned(tokenizer),
    )
    return ExecutorStep(name=f"tokenized/{name}", fn=tokenize, config=config)


def test_tokenize_names_of_marins_defaults(tmp_path):
    """What Marin's experiments/defaults.py imports from marin.processing.tokenize."""
    hf = HfTokenizeConfig(id="org/web", cache_path=this_output_path(), tokenizer=versioned("gpt2"), name="en")
    made = ExecutorStep(name="tokenized/web", fn=tokenize, config=hf)
    marin = marin_hash({"name": "tokenized/web", "config": {"tokenizer": "gpt2"}, "dependencies": []})
    assert StepGraph([made], "/p").resolved(made).hash == marin == "6f7f1e"
    converted = hf.as_tokenize_config()
    assert isinstance(converted, TokenizeConfigBase) and isinstance(hf, TokenizeConfigBase)
    assert (converted.hf_dataset.id, converted.hf_dataset.name) == ("org/web", "en")

    web, paloma = tokenize_step("web", "t"), tokenize_step("paloma", "t")
    mixture = add_validation_sets_to_mixture(lm_data_config(web), {"paloma": paloma})
    assert mixture.train_weights == {"web": 1.0, "paloma": 0.0} and set(mixture.configs) == {"web", "paloma"}
    evaluation = mixture_for_evaluation({"web": web, "paloma": paloma})
    assert evaluation.train_weights == {"web": 0.0, "paloma": 0.0} and not evaluation.shuffle

    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    texts = [f"alpha beta gamma delta {i} {i * 7}" for i in range(200)]
    tokenizer = build_fast_tokenizer(texts, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(tmp_path / "tok")
    assert get_vocab_size_for_tokenizer(str(tmp_path / "tok")) == len(tokenizer) > 4


def test_vocab_size_of_a_tokenizer_folder_on_gcs(gcs_prefix, tmp_path):
    import fsspec

    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    texts = [f"alpha beta gamma {i}" for i in range(100)]
    tokenizer = build_fast_tokenizer(texts, vocab_size=120, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(tmp_path / "tok")
    remote = f"{gcs_prefix}/tokenizers/tiny"
    fs = fsspec.filesystem("gs")
    for path in (tmp_path / "tok").iterdir():
        fs.put_file(str(path), f"{remote}/{path.name}")
    assert get_vocab_size_for_tokenizer(remote) == len(tokenizer) > 4


def test_ckpt_path_to_step_name_as_marin():
    run = ExecutorStep(name="checkpoints/marin-nano", fn=tokenize_fn, config=TokenizeCfg([], this_output_path(), ""))
    assert (
        ckpt_path_to_step_name("gs://b/checkpoints/llama-8b-tootsie/checkpoints/step-730000")
        == "llama-8b-tootsie-730000"
    )
    assert ckpt_path_to_step_name("meta-llama/Meta-Llama-3.1-8B") == "Meta-Llama-3.1-8B"
    assert ckpt_path_to_step_name("/models/some-model/") == "some-model"
    assert ckpt_path_to_step_name(output_path_of(run, "hf/step-15")) == "marin-nano-15"
    assert ckpt_path_to_step_name(output_path_of(run)) == "marin-nano"
    for bad in ("gs://b/checkpoints/run/checkpoints", output_path_of(run, "checkpoints/latest")):
        try:
            ckpt_path_to_step_name(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad} should be invalid")


def test_fsspec_directory_helpers(tmp_path):
    for rel in ("a/x/1.txt", "a/y/2.txt", "b/3.txt"):
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(rel)
    src = str(tmp_path / "src")
    assert fsspec_get_curr_subdirectories(src) == [f"{src}/a", f"{src}/b"]
    assert fsspec_get_atomic_directories(src) == [f"{src}/a/x", f"{src}/a/y", f"{src}/b"]
    fsspec_cpdir(src, str(tmp_path / "copy"))
    assert (tmp_path / "copy" / "a" / "y" / "2.txt").read_text() == "a/y/2.txt"
