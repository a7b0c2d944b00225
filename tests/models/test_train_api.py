"""One training API: ``default_train`` (Marin's path) and a Levanter ``TrainLmConfig`` given directly
build the same Levanter config; every ``SimpleTrainConfig`` field lands in ``train_config.yaml``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """A folder of jsonl documents and a tokenizer directory trained on them."""
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    root = tmp_path_factory.mktemp("inputs")
    texts = [f"document {i} says alpha beta gamma delta {i % 7}." for i in range(50)]
    (root / "docs").mkdir()
    with gzip.open(root / "docs" / "part-0.jsonl.gz", "wt") as handle:
        for text in texts:
            handle.write(json.dumps({"text": text}) + "\n")
    tokenizer = build_fast_tokenizer(texts, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.save_pretrained(root / "tok")
    return root


def resolved(step, prefix: str):
    """The step's config with every placeholder resolved, as its function receives it."""
    from marin_assets.execution.versioning import StepGraph, instantiate_config

    graph = StepGraph([step], prefix)
    return instantiate_config(step.config, graph.resolved(step), None, graph)


def marin_step(inputs: Path, eval_harness_tasks=(), **train_fields):
    """``(tokenize step, train step)`` over ``inputs``; ``eval_harness_tasks=None``: default_train's default."""
    from marin_assets.execution.step import versioned
    from marin_assets.experiments.defaults import default_tokenize, default_train
    from marin_assets.experiments.llama import llama_nano
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_resources import CpuOnlyConfig

    tokenized = default_tokenize("docs", str(inputs / "docs"), str(inputs / "tok"))
    settings = dict(
        resources=CpuOnlyConfig(num_cpus=1),
        train_batch_size=4,
        num_train_steps=3,
        learning_rate=1e-3,
        weight_decay=0.05,
        steps_per_eval=2,
        max_eval_batches=1,
        steps_per_export=3,
    )
    settings.update(train_fields)
    return tokenized, default_train(
        "api",
        tokenized,
        versioned(llama_nano),
        SimpleTrainConfig(**settings),
        override_output_path="checkpoints/api",
        **({} if eval_harness_tasks is None else {"eval_harness_tasks": eval_harness_tasks}),
    )


def written_yaml(pod, tmp_path: Path) -> dict:
    """What the training subprocess writes before it trains: ``<out>/train_config.yaml``."""
    from marin_assets.training.levanter_config import prepare_training

    prepare_training(pod, str(tmp_path / "local.yaml"))
    return yaml.safe_load(Path(pod.output_path, "train_config.yaml").read_text())


def test_marin_path_and_direct_levanter_config_build_the_same_config(inputs, tmp_path):
    from levanter.checkpoint import CheckpointerConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.optim import AdamConfig
    from levanter.trainer import TrainerConfig

    from marin_assets.execution.step import ExecutorStep, this_output_path
    from marin_assets.experiments.llama import llama_nano
    from marin_assets.processing.tokenize import lm_data_config
    from marin_assets.training.levanter_config import build_levanter_config, levanter_config_yaml
    from marin_assets.training.training import TrainLmOnPodConfig, run_levanter_train_lm
    from marin_resources import CpuOnlyConfig

    tokenized, marin = marin_step(inputs)
    direct = ExecutorStep(
        name="checkpoints/api",
        fn=run_levanter_train_lm,
        config=TrainLmOnPodConfig(
            train_config=TrainLmConfig(
                data=lm_data_config(tokenized),
                model=llama_nano,
                trainer=TrainerConfig(
                    train_batch_size=4,
                    num_train_steps=3,
                    steps_per_eval=2,
                    max_eval_batches=1,
                    checkpointer=CheckpointerConfig(keep=[dict(every=3)]),
                ),
                optimizer=AdamConfig(learning_rate=1e-3, weight_decay=0.05),
                hf_save_steps=3,
            ),
            resources=CpuOnlyConfig(num_cpus=1),
            output_path=this_output_path(),
        ),
        override_output_path="checkpoints/api",
    )
    prefix = str(tmp_path / "prefix")
    ours = build_levanter_config(resolved(marin, prefix))
    theirs = build_levanter_config(resolved(direct, prefix))
    assert levanter_config_yaml(ours) == levanter_config_yaml(theirs)
    assert ours.trainer.checkpointer.base_path == f"{prefix}/checkpoints/api/checkpoints"
    assert ours.data.configs["docs"].cache_dir.startswith(f"{prefix}/tokenized/docs-")
    # A different setting gives a different config (the comparison is not vacuous).
    _, other = marin_step(inputs, learning_rate=2e-3)
    assert levanter_config_yaml(build_levanter_config(resolved(other, prefix))) != levanter_config_yaml(ours)


def test_optimizer_fields_are_applied(inputs, tmp_path):
    _, step = marin_step(
        inputs,
        beta1=0.8,
        beta2=0.97,
        epsilon=1e-6,
        max_grad_norm=0.5,
        warmup=0.1,
        decay=0.3,
        rewarmup=0.02,
        lr_schedule="linear",
        min_lr_ratio=0.05,
        cycle_length=2,
        skip_bad_steps=True,
    )
    opt = written_yaml(resolved(step, str(tmp_path)), tmp_path)["optimizer"]
    assert (opt["beta1"], opt["beta2"], opt["epsilon"], opt["max_grad_norm"]) == (0.8, 0.97, 1e-6, 0.5)
    assert (opt["warmup"], opt["decay"], opt["rewarmup"], opt["cycle_length"]) == (0.1, 0.3, 0.02, 2)
    assert (opt["lr_schedule"], opt["min_lr_ratio"], opt["skip_bad_steps"]) == ("linear", 0.05, True)
    assert (opt["learning_rate"], opt["weight_decay"]) == (1e-3, 0.05)


def test_optimizer_config_replaces_adamw(inputs, tmp_path):
    from levanter.optim import AdamConfig

    _, step = marin_step(inputs, optimizer_config=AdamConfig(learning_rate=0.25, beta1=0.5))
    opt = written_yaml(resolved(step, str(tmp_path)), tmp_path)["optimizer"]
    assert (opt["learning_rate"], opt["beta1"]) == (0.25, 0.5)


def test_trainer_and_loss_fields_are_applied(inputs, tmp_path):
    from levanter.callbacks.watch import WatchConfig

    _, step = marin_step(
        inputs,
        int8=True,
        ema_beta=0.99,
        watch=WatchConfig(interval=5),
        per_device_eval_parallelism=2,
        allow_partial_checkpoint=True,
        z_loss_weight=1e-4,
        data_seed=7,
        train_seq_len=64,
        steps_per_hf_export=2,
    )
    written = written_yaml(resolved(step, str(tmp_path)), tmp_path)
    trainer = written["trainer"]
    assert trainer["quantization"]["int8"] is True
    assert trainer["model_averaging"]["beta"] == 0.99
    assert trainer["watch"]["interval"] == 5
    assert (trainer["per_device_eval_parallelism"], trainer["allow_partial_checkpoint"]) == (2, True)
    assert (written["z_loss_weight"], written["data_seed"], written["hf_save_steps"]) == (1e-4, 7, 2)
    assert written["model"]["seq_len"] == 64  # train_seq_len; the versioned llama_nano keeps 512


def test_initialization_fields_are_applied(inputs, tmp_path):
    ckpt = str(tmp_path / "ckpt" / "step-5")
    _, step = marin_step(inputs, initialize_from_checkpoint_path=ckpt)
    assert written_yaml(resolved(step, str(tmp_path / "a")), tmp_path)["initialize_from_checkpoint_path"] == ckpt
    _, keep_loader = marin_step(inputs, initialize_from_checkpoint_path=ckpt, reset_data_loader_on_init=False)
    written = written_yaml(resolved(keep_loader, str(tmp_path / "b")), tmp_path)
    assert written["trainer"]["initialize_from"] == ckpt and written["initialize_from_checkpoint_path"] is None
    hf_dir = tmp_path / "hf_model"
    hf_dir.mkdir()
    _, from_hf = marin_step(inputs, initialize_from_hf=str(hf_dir))
    assert written_yaml(resolved(from_hf, str(tmp_path / "c")), tmp_path)["initialize_from_hf"] == str(hf_dir)
    _, missing = marin_step(inputs, initialize_from_hf="meta-llama/Llama-3.1-8B")
    with pytest.raises(FileNotFoundError, match="initialize_from_hf"):
        written_yaml(resolved(missing, str(tmp_path / "d")), tmp_path)


def test_settings_that_cannot_apply_are_errors_naming_them(inputs):
    with pytest.raises(ValueError, match="pad_tokenizer_to_match_model"):
        marin_step(inputs, pad_tokenizer_to_match_model=True)


def test_training_evaluation_and_tokenize_modules_import_without_cycles():
    """No import cycle (module level or inside functions) among the model-side modules."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "marin_assets"
    files = [*root.glob("training/*.py"), *root.glob("evaluation/**/*.py"), *root.glob("eval_data/*.py")]
    files += [*root.glob("processing/tokenize/*.py")]
    files += [*root.glob("experiments/evals/*.py"), root / "experiments/defaults.py"]
    graph: dict[str, set[str]] = {}
    for path in files:
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        graph[name] = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("marin_assets")
        }

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for dep in graph.get(start, ()):
            if dep == target or (dep not in seen and reaches(dep, target, seen | {dep})):
                return True
        return False

    assert len(graph) > 15
    assert [name for name in graph if reaches(name, name, {name})] == []


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_levanter_gpt2_config_given_directly_trains_and_exports(inputs, tmp_path):
    """Marin's integration-test path: ``TrainLmOnPodConfig(train_config=TrainLmConfig(model=Gpt2Config(...)))``
    over ``lm_data_config(default_tokenize(...))``, 2 steps on CPU, with an HF export every step (offline:
    Gpt2Config's converter names the hub's "gpt2", redirected to a local reference)."""
    from levanter.main.train_lm import TrainLmConfig
    from levanter.models.gpt2 import Gpt2Config
    from levanter.trainer import TrainerConfig
    from transformers import AutoConfig

    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.step import ExecutorStep, this_output_path
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.defaults import default_tokenize
    from marin_assets.processing.tokenize import lm_data_config
    from marin_assets.training.training import TrainLmOnPodConfig, run_levanter_train_lm
    from marin_resources import CpuOnlyConfig

    tokenized = default_tokenize("gpt2-docs", str(inputs / "docs"), str(inputs / "tok"))
    train = ExecutorStep(
        name="gpt2/train",
        fn=run_levanter_train_lm,
        config=TrainLmOnPodConfig(
            output_path=this_output_path(),
            resources=CpuOnlyConfig(num_cpus=1),
            env_vars={"WANDB_API_KEY": "", "WANDB_MODE": "disabled", "JAX_PLATFORMS": "cpu"},
            train_config=TrainLmConfig(
                data=lm_data_config(tokenized, permutation_type="linear"),
                hf_save_steps=1,
                model=Gpt2Config(num_layers=2, num_heads=2, seq_len=64, hidden_dim=32),
                trainer=TrainerConfig(
                    train_batch_size=8, num_train_steps=2, max_eval_batches=1, require_accelerator=False
                ),
            ),
        ),
    )
    prefix = str(tmp_path / "prefix")
    report = run_steps([train], prefix)
    assert not report.failed, [o.error for o in report.failed]
    out = Path(StepGraph([train], prefix).resolved(train).output_path)
    exports = sorted(p.parent for p in out.glob("hf/step-*/config.json"))
    assert exports and AutoConfig.from_pretrained(exports[-1]).model_type == "gpt2"
    written = yaml.safe_load((out / "train_config.yaml").read_text())
    assert written["data"]["permutation_type"] == "linear" and written["model"]["type"] == "gpt2"
    assert {o.action for o in run_steps([train], prefix).outcomes} == {"cached"}


def test_training_metadata_is_numeric_and_the_loss_curve_a_dagster_table(tmp_path):
    """Flat floats for the losses, and the curve as Dagster's table (columns typed from every row)."""
    import dagster as dg

    from marin_assets.dagster_bridge.metadata import to_dagster_metadata
    from marin_assets.training.training import summarize_training

    log = "\n".join(
        "INFO " + json.dumps({"tracker": "json_logger", "event": "log", "step": step, "metrics": metrics})
        for step, metrics in [
            (0, {"train": {"loss": 9.0}}),
            (1, {"train": {"loss": 7.5}, "eval": {"loss": 7.9, "heldout": {"loss": 8.1, "bpb": 3.2}}}),
            (2, {"train": {"loss": 6.25}}),
        ]
    )
    meta = summarize_training(str(tmp_path), {"num_train_steps": 3, "train_batch_size": 2, "seq_len": 8}, log, 1.0)
    assert (meta["initial_loss"], meta["final_loss"], meta["eval_loss"]) == (9.0, 6.25, 7.9)
    assert (meta["eval/heldout/loss"], meta["eval/heldout/bpb"]) == (8.1, 3.2)
    dagster = to_dagster_metadata(meta)
    assert isinstance(dagster["final_loss"], dg.FloatMetadataValue)
    assert isinstance(dagster["eval/heldout/bpb"], dg.FloatMetadataValue)
    curve = dagster["loss_table"]
    assert isinstance(curve, dg.TableMetadataValue)
    assert {c.name: c.type for c in curve.schema.columns} == {
        "step": "int",
        "train_loss": "float",
        "eval_loss": "float",
    }
    assert [r.data.get("train_loss") for r in curve.records] == [9.0, 7.5, 6.25]
    assert [r.data.get("eval_loss") for r in curve.records] == [None, 7.9, None]
