"""Training as a step: Levanter's ``train_lm`` on a mixture of tokenized caches.

``default_train`` returns a step ``checkpoints/<name>`` whose function writes a Levanter
``TrainLmConfig`` (``<out>/train_config.yaml``) and runs ``python -m levanter.main.train_lm`` on it
in a subprocess. A subprocess keeps JAX's memory and threads out of the engine/Dagster process,
makes "kill the worker" a real SIGKILL of one process, and lets the step read throughput and loss
from Levanter's own JSON tracker log afterwards.

Output layout::

    <out>/train_config.yaml        the exact Levanter config that ran
    <out>/checkpoints/step-N/      Levanter checkpoints (resume point)
    <out>/hf/step-N/               HF (safetensors) export, loadable by transformers / lm-eval
    <out>/train.log                Levanter's log; json_logger metric records are lines in it
    <out>/metrics.jsonl            the metric records alone (step, metrics)
    <out>/loss_curve.png           train/eval loss per step
    <out>/train_summary.json       what the step returns as metadata

Resume: the run id is derived from the output path and the checkpointer writes to a fixed folder,
so a rerun of a killed step finds ``checkpoints/step-N`` and Levanter continues from step N.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import pathlib
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.metadata import markdown
from marin_assets.execution.step import ExecutorStep, InputName, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_bytes, atomic_write_text, filesystem, is_local, join_path
from marin_assets.models._io import as_path_list
from marin_assets.models.tokenize import cache_split_stats, read_ledger

logger = logging.getLogger(__name__)

JSON_LOGGER_MARK = '"tracker": "json_logger"'


# ----------------------------------------------------------------------------------------------
# Our small configs (what experiments write) -- mapped to Levanter's config classes below.
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LlamaModelConfig:
    """A Llama-architecture model; the defaults are the tiny CPU model (~0.66 M parameters)."""

    seq_len: int = 128
    hidden_dim: int = 64
    intermediate_dim: int = 256
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 4
    tie_word_embeddings: bool = False


TINY_LLAMA = LlamaModelConfig()


@dataclass(frozen=True)
class SimpleTrainConfig:
    """Trainer and optimizer settings.

    Attributes:
        train_batch_size: sequences per step.
        num_train_steps: optimizer steps.
        learning_rate / weight_decay / warmup / min_lr_ratio / lr_schedule: AdamW with a schedule.
        steps_per_checkpoint: keep a checkpoint every N steps (also the resume granularity).
        steps_per_eval: evaluate on the validation caches every N steps.
        steps_per_hf_export: HF export every N steps (None: only at the end).
        max_eval_batches: cap on eval batches per validation set (None: all).
        mp: Levanter/jmp mixed-precision policy (``p=f32,c=bfloat16`` on accelerators).
        seed: model/data seed.
        shuffle: shuffle each cache (linear permutation).
    """

    train_batch_size: int = 32
    num_train_steps: int = 200
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    warmup: float = 0.05
    min_lr_ratio: float = 0.1
    lr_schedule: str = "cosine"
    steps_per_checkpoint: int = 100
    steps_per_eval: int = 100
    steps_per_hf_export: int | None = None
    max_eval_batches: int | None = 8
    mp: str = "p=f32,c=f32"
    seed: int = 0
    shuffle: bool = True


@dataclass(frozen=True)
class MixtureData:
    """Tokenized caches with mixing weights (Marin's ``lm_mixture_data_config``).

    ``components`` maps a name to a tokenized step / ``InputName`` / cache path, or to a partitioned
    step's ``.partitions()`` (a list of caches, one per drop; the component's weight is then shared
    among drops in proportion to their tokens). ``weights`` may omit components: they are then
    validation-only (weight 0).
    """

    components: Mapping[str, Any]
    weights: Mapping[str, float]


def lm_mixture_data_config(components: Mapping[str, Any], weights: Mapping[str, float]) -> MixtureData:
    """A training mixture over tokenized caches (see :class:`MixtureData`)."""
    unknown = set(weights) - set(components)
    if unknown:
        raise ValueError(f"weights for unknown components: {sorted(unknown)}")
    if not any(w > 0 for w in weights.values()):
        raise ValueError("at least one component needs a positive weight")
    return MixtureData(dict(components), dict(weights))


@dataclass(frozen=True)
class TrainConfig:
    """Config of :func:`run_training` (placeholders resolved by the engine).

    Attributes:
        output_path: the step output.
        components: name -> cache root path, or list of cache roots (partitions).
        weights: name -> mixture weight (missing: 0, validation only).
        model: model shape.
        train: trainer/optimizer settings.
        tokenizer: tokenizer dir; None reads it from the first cache's ledger.
        run_id: Levanter run id; None derives it from the output path (stable across reruns).
        tags: tracker tags.
        eval_harness_tasks: lm-eval tasks recorded for the eval step (evaluation runs there).
        use_default_validation: evaluate on the validation splits of the caches during training.
        in_process: run ``train_lm.main`` in this process instead of a subprocess.
        accelerator: ``"cpu"`` pins JAX to CPU; ``"gpu"``/``"tpu"`` let JAX pick the device and
            make Levanter require one (set by ``default_train`` from ``resources``).
        timeout_s: kill the subprocess after this long.
        env: extra environment variables for the training process.
    """

    output_path: str
    components: Mapping[str, str | Sequence[str]]
    weights: Mapping[str, float]
    model: LlamaModelConfig = TINY_LLAMA
    train: SimpleTrainConfig = SimpleTrainConfig()
    tokenizer: str | None = None
    run_id: str | None = None
    tags: tuple[str, ...] = ()
    eval_harness_tasks: tuple[str, ...] = ()
    use_default_validation: bool = True
    in_process: bool = False
    accelerator: str = "cpu"
    timeout_s: float = 6 * 3600.0
    env: Mapping[str, str] = field(default_factory=dict)


# ----------------------------------------------------------------------------------------------
# Levanter config
# ----------------------------------------------------------------------------------------------


def _component_caches(
    components: Mapping[str, str | Sequence[str]], weights: Mapping[str, float]
) -> tuple[dict[str, str], dict[str, float]]:
    """Flatten partitioned components into one Levanter component per cache, splitting weights.

    A component given as a list of caches (one per drop) becomes ``<name>-<drop>`` components
    whose weights add up to the component's weight, in proportion to each drop's train tokens:
    drops are concatenated, not re-balanced.
    """
    caches: dict[str, str] = {}
    flat_weights: dict[str, float] = {}
    for name, value in components.items():
        weight = float(weights.get(name, 0.0))
        if isinstance(value, str):
            caches[name] = value
            flat_weights[name] = weight
            continue
        paths = as_path_list(value)
        if not paths:
            raise ValueError(f"component {name!r} has no caches (no partitions materialized?)")
        tokens = []
        for p in paths:
            stats = cache_split_stats(join_path(p, "train"))
            tokens.append(float(stats["tokens"]) if stats and stats.get("tokens") else 0.0)
        total = sum(tokens)
        for p, t in zip(paths, tokens, strict=True):
            key = f"{name}-{p.rstrip('/').rsplit('/', 1)[-1]}"
            caches[key] = p
            flat_weights[key] = weight * (t / total if total > 0 else 1.0 / len(paths))
    return caches, flat_weights


def _tokenizer_of(caches: Mapping[str, str]) -> str:
    for path in caches.values():
        for split in ("train", "validation"):
            ledger = read_ledger(join_path(path, split))
            if ledger:
                tok = (ledger.get("metadata", {}).get("preprocessor_metadata") or {}).get("tokenizer")
                if tok:
                    return tok
    raise ValueError(f"cannot find the tokenizer in the ledgers of {list(caches.values())}")


def default_run_id(output_path: str) -> str:
    """A stable Levanter run id for ``output_path`` (same path -> same id -> resume)."""
    base = output_path.rstrip("/").rsplit("/", 1)[-1]
    return f"{base[:40]}-{hashlib.md5(output_path.encode()).hexdigest()[:8]}"


def reference_checkpoint_dir(config: TrainConfig, run_id: str) -> str:
    """Local folder holding the HF ``config.json`` Levanter's HF exporter starts from."""
    if is_local(config.output_path):
        return join_path(config.output_path, "hf_reference")
    return f"/tmp/marin-hf-reference/{run_id}"


def levanter_llama_config(m: LlamaModelConfig, reference_checkpoint: str, tokenizer: str) -> Any:
    """Levanter's ``LlamaConfig`` for our model shape, pointing at local files only.

    Levanter's defaults point at the HF hub; nothing may be downloaded, so a local HF config
    (written by :func:`write_reference_checkpoint`) and our own tokenizer are used instead.
    """
    from levanter.models.llama import LlamaConfig

    return LlamaConfig(
        seq_len=m.seq_len,
        hidden_dim=m.hidden_dim,
        intermediate_dim=m.intermediate_dim,
        num_layers=m.num_layers,
        num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads,
        tie_word_embeddings=m.tie_word_embeddings,
        reference_checkpoint=reference_checkpoint,
        tokenizer=tokenizer,
    )


def write_reference_checkpoint(path: str, model: LlamaModelConfig, tokenizer: str) -> None:
    """Write a transformers ``LlamaConfig`` matching ``model`` (and the tokenizer) to ``path``.

    Levanter's HF export reads the reference checkpoint's config for fields it does not set
    itself; by default that is a hub model, which cannot be fetched here.
    """
    from transformers import AutoTokenizer
    from transformers import LlamaConfig as HfLlamaConfig

    tok = AutoTokenizer.from_pretrained(tokenizer)
    hf = HfLlamaConfig(
        vocab_size=len(tok),
        hidden_size=model.hidden_dim,
        intermediate_size=model.intermediate_dim,
        num_hidden_layers=model.num_layers,
        num_attention_heads=model.num_heads,
        num_key_value_heads=model.num_kv_heads,
        max_position_embeddings=model.seq_len,
        tie_word_embeddings=model.tie_word_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    os.makedirs(path, exist_ok=True)
    hf.save_pretrained(path)
    tok.save_pretrained(path)


def _use_wandb() -> bool:
    # W&B only when the user has set a key and did not disable it; the key stays in the env.
    return bool(os.environ.get("WANDB_API_KEY")) and os.environ.get("WANDB_MODE", "").lower() != "disabled"


def build_levanter_config(config: TrainConfig):
    """The ``levanter.main.train_lm.TrainLmConfig`` this step runs."""
    import jmp
    from levanter.checkpoint import CheckpointerConfig
    from levanter.data.text import LMMixtureDatasetConfig, UrlDatasetSourceConfig
    from levanter.distributed import RayConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.optim import AdamConfig
    from levanter.tracker.json_logger import JsonLoggerConfig
    from levanter.trainer import TrainerConfig

    caches, weights = _component_caches(config.components, config.weights)
    tokenizer = config.tokenizer or _tokenizer_of(caches)
    train = config.train
    out = config.output_path
    run_id = config.run_id or default_run_id(out)
    reference = reference_checkpoint_dir(config, run_id)
    sources = {
        name: UrlDatasetSourceConfig(cache_dir=path, train_urls=[], validation_urls=[]) for name, path in caches.items()
    }
    data = LMMixtureDatasetConfig(
        tokenizer=tokenizer,
        cache_dir=None,
        configs=sources,
        train_weights=weights,
        shuffle=train.shuffle,
        permutation_type="feistel" if train.shuffle else None,
    )
    trackers: tuple = (JsonLoggerConfig(),)
    if _use_wandb():
        from levanter.tracker.wandb import WandbConfig

        trackers = (
            JsonLoggerConfig(),
            WandbConfig(project=os.environ.get("WANDB_PROJECT", "marin"), tags=list(config.tags)),
        )
    model = levanter_llama_config(config.model, reference, tokenizer)
    steps_per_eval = train.steps_per_eval if config.use_default_validation else train.num_train_steps * 10 + 1
    trainer = TrainerConfig(
        seed=train.seed,
        mp=jmp.get_policy(train.mp),
        tracker=trackers,
        log_dir=pathlib.Path(join_path(out, "logs") if is_local(out) else f"/tmp/marin-train-logs/{run_id}"),
        id=run_id,
        train_batch_size=train.train_batch_size,
        num_train_steps=train.num_train_steps,
        steps_per_eval=steps_per_eval,
        max_eval_batches=train.max_eval_batches,
        checkpointer=CheckpointerConfig(
            base_path=join_path(out, "checkpoints"),
            append_run_id_to_base_path=False,
            keep=[dict(every=train.steps_per_checkpoint)],
        ),
        ray=RayConfig(auto_start_cluster=False),
        require_accelerator=config.accelerator != "cpu",
    )
    return TrainLmConfig(
        data=data,
        trainer=trainer,
        model=model,
        optimizer=AdamConfig(
            learning_rate=train.learning_rate,
            weight_decay=train.weight_decay,
            warmup=train.warmup,
            min_lr_ratio=train.min_lr_ratio,
            lr_schedule=train.lr_schedule,
        ),
        hf_save_path=join_path(out, "hf"),
        hf_save_steps=train.steps_per_hf_export or train.num_train_steps,
    )


def levanter_config_yaml(lev_config) -> str:
    """``lev_config`` as the YAML ``levanter.main.train_lm --config_path`` reads.

    ``draccus.dump`` leaves enums (e.g. the activation function) as Python-tagged objects that its
    own loader refuses, so the encoded tree is cleaned to plain YAML first.
    """
    import enum

    import draccus
    import yaml

    def plain(obj: Any) -> Any:
        if isinstance(obj, enum.Enum):
            return plain(obj.value)
        if isinstance(obj, Mapping):
            return {k: plain(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [plain(v) for v in obj]
        if isinstance(obj, pathlib.PurePath):
            return str(obj)
        return obj

    return yaml.safe_dump(plain(draccus.encode(lev_config)), sort_keys=False)


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------


def parse_metrics(log_text: str) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Per-step metrics and summary metrics from Levanter json_logger lines (later lines win)."""
    steps: dict[int, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    for line in log_text.splitlines():
        i = line.find("{")
        if i < 0 or JSON_LOGGER_MARK not in line:
            continue
        try:
            record = json.loads(line[i:])
        except json.JSONDecodeError:
            continue
        if record.get("event") == "log" and record.get("step") is not None:
            steps.setdefault(int(record["step"]), {}).update(_flatten(record.get("metrics", {})))
        elif record.get("event") == "summary":
            summary.update(_flatten(record.get("metrics", {})))
    return steps, summary


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def list_step_dirs(path: str) -> list[tuple[int, str]]:
    """``(N, path)`` for every ``step-N`` directory below ``path``, sorted by N."""
    fs, p = filesystem(path)
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in fs.ls(p, detail=False):
            base = entry.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith("step-") and base[5:].isdigit():
                found.append((int(base[5:]), join_path(path, base)))
    return sorted(found)


def _loss_curve_png(steps: Mapping[int, Mapping[str, Any]]) -> bytes | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    train = sorted((s, m["train/loss"]) for s, m in steps.items() if "train/loss" in m)
    evals = sorted((s, m["eval/loss"]) for s, m in steps.items() if "eval/loss" in m)
    if not train:
        return None
    fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
    ax.plot([s for s, _ in train], [v for _, v in train], label="train/loss")
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], "o-", label="eval/loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def training_env(extra: Mapping[str, str] | None = None, accelerator: str = "cpu") -> dict[str, str]:
    """Environment for the training subprocess: offline HF, no W&B unless a key is set."""
    env = dict(os.environ)
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if not _use_wandb():
        env["WANDB_MODE"] = "disabled"
    # Only the CPU path pins JAX to CPU; on GPU/TPU workers JAX picks the accelerator.
    if accelerator == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    elif env.get("JAX_PLATFORMS") == "cpu":
        env.pop("JAX_PLATFORMS")
    env.pop("RAY_ADDRESS", None)  # Levanter must not attach to the engine's Ray (auto_start is off)
    env.update(extra or {})
    return env


def _log_path(config: TrainConfig) -> str:
    # The log is appended across resumes; on object stores it is written locally and uploaded.
    if is_local(config.output_path):
        return join_path(config.output_path, "train.log")
    return os.path.join("/tmp", f"marin-train-{default_run_id(config.output_path)}.log")


def launch_training(config: TrainConfig, yaml_path: str, log_path: str) -> subprocess.Popen:
    """Start ``python -m levanter.main.train_lm --config_path yaml_path`` (own process group)."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    log = open(log_path, "ab")  # noqa: SIM115 -- handed to the child, closed by the caller
    log.write(f"\n===== marin: train_lm start {time.strftime('%Y-%m-%dT%H:%M:%S')} =====\n".encode())
    log.flush()
    proc = subprocess.Popen(
        [sys.executable, "-m", "levanter.main.train_lm", "--config_path", yaml_path],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=training_env(config.env, config.accelerator),
        start_new_session=True,
    )
    log.close()
    return proc


def run_training(config: TrainConfig) -> dict:
    """Run (or resume) Levanter training into ``config.output_path``; returns step metadata."""
    out = config.output_path
    lev_config = build_levanter_config(config)
    write_reference_checkpoint(lev_config.model.reference_checkpoint, config.model, lev_config.data.tokenizer)
    yaml_text = levanter_config_yaml(lev_config)
    atomic_write_text(join_path(out, "train_config.yaml"), yaml_text)
    resumed_from = list_step_dirs(join_path(out, "checkpoints"))
    log_path = _log_path(config)
    start = time.monotonic()
    if config.in_process:
        from levanter.main.train_lm import main as train_main

        train_main(lev_config)
        log_text = ""
    else:
        local_yaml = log_path + ".config.yaml"
        with open(local_yaml, "w") as handle:
            handle.write(yaml_text)
        proc = launch_training(config, local_yaml, log_path)
        try:
            rc = proc.wait(timeout=config.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise TimeoutError(f"training did not finish in {config.timeout_s}s; log: {log_path}") from None
        except BaseException:
            # The step is being cancelled: do not leave an orphan trainer behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            raise
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            log_text = handle.read()
        if rc != 0:
            raise RuntimeError(f"levanter train_lm exited with {rc}; log {log_path}:\n{log_text[-4000:]}")
        if not is_local(out):
            atomic_write_bytes(join_path(out, "train.log"), log_text.encode())
    wall = time.monotonic() - start
    return summarize_training(config, log_text, wall, resumed_from[-1][0] if resumed_from else 0)


def summarize_training(config: TrainConfig, log_text: str, wall_s: float, resumed_from_step: int = 0) -> dict:
    """Metadata of a finished run from its metric log and output folder (also writes files)."""
    out = config.output_path
    steps, summary = parse_metrics(log_text)
    lines = [json.dumps({"step": s, "metrics": m}, default=str) for s, m in sorted(steps.items())]
    atomic_write_text(join_path(out, "metrics.jsonl"), "\n".join(lines) + "\n")
    train_losses = [(s, float(m["train/loss"])) for s, m in sorted(steps.items()) if "train/loss" in m]
    eval_losses = [(s, float(m["eval/loss"])) for s, m in sorted(steps.items()) if "eval/loss" in m]
    # Steady-state throughput: skip the first logged steps (compilation) when there are enough.
    tps = [
        float(m["throughput/tokens_per_second"])
        for s, m in sorted(steps.items())
        if "throughput/tokens_per_second" in m
    ]
    steady = tps[len(tps) // 5 :] if len(tps) >= 5 else tps
    train = config.train
    tokens_seen = train.num_train_steps * train.train_batch_size * config.model.seq_len
    checkpoints = [p for _, p in list_step_dirs(join_path(out, "checkpoints"))]
    hf = [p for _, p in list_step_dirs(join_path(out, "hf"))]
    meta: dict[str, Any] = {
        "initial_loss": train_losses[0][1] if train_losses else None,
        "final_loss": train_losses[-1][1] if train_losses else None,
        "initial_eval_loss": eval_losses[0][1] if eval_losses else None,
        "eval_loss": eval_losses[-1][1] if eval_losses else None,
        "tokens_seen": tokens_seen,
        "tokens_per_s": round(sum(steady) / len(steady), 1) if steady else None,
        "tokens_per_s_wall": round(tokens_seen / wall_s, 1) if wall_s > 0 else None,
        "wall_s": round(wall_s, 2),
        "parameter_count": summary.get("parameter_count"),
        "num_train_steps": train.num_train_steps,
        "resumed_from_step": resumed_from_step,
        "checkpoints": checkpoints,
        "hf_exports": hf,
        "hf_export": hf[-1] if hf else None,
        "output_path": out,
    }
    png = _loss_curve_png(steps)
    if png:
        atomic_write_bytes(join_path(out, "loss_curve.png"), png)
        meta["loss_curve"] = markdown(f"![loss curve](data:image/png;base64,{base64.b64encode(png).decode()})")
    atomic_write_text(
        join_path(out, "train_summary.json"), json.dumps({k: v for k, v in meta.items() if k != "loss_curve"}, indent=2)
    )
    return meta


# ----------------------------------------------------------------------------------------------
# The step
# ----------------------------------------------------------------------------------------------


def accelerator_kind(resources: Any) -> str:
    """``"cpu"``, ``"gpu"`` or ``"tpu"`` for an accelerator config of ``marin_resources.accelerators``."""
    if resources is None:
        return "cpu"
    kind = type(resources).__name__.lower()
    for name in ("gpu", "tpu"):
        if kind.startswith(name):
            return name
    return "cpu"


TokenizedLike = ExecutorStep | InputName | str | Sequence[str]


def _as_component(value: Any) -> Any:
    if isinstance(value, str):
        return InputName.hardcoded(value)
    if isinstance(value, ExecutorStep) and value.partitioned_by is not None:
        return value.partitions()  # every drop of a partitioned cache
    if isinstance(value, (list, tuple)):
        return [_as_component(v) for v in value]
    return value


def default_train(
    name: str,
    tokenized: TokenizedLike | MixtureData | Mapping[str, TokenizedLike],
    model_config: LlamaModelConfig = TINY_LLAMA,
    train_config: SimpleTrainConfig = SimpleTrainConfig(),
    tags: Sequence[str] = (),
    eval_harness_tasks: Sequence[str] = (),
    use_default_validation: bool = True,
    resources: Any = None,
    validation_sets: Mapping[str, TokenizedLike] | None = None,
) -> ExecutorStep:
    """A step ``checkpoints/<name>`` training a Levanter LM on ``tokenized``.

    Args:
        name: step name suffix.
        tokenized: one tokenized step/path (weight 1), a dict name -> tokenized (equal weights), or
            a :class:`MixtureData` from :func:`lm_mixture_data_config`. A partitioned tokenized
            step contributes every drop.
        model_config: model shape (tiny Llama by default); versioned.
        train_config: trainer/optimizer settings; versioned.
        tags: tracker tags (not versioned).
        eval_harness_tasks: lm-eval task names for :func:`default_eval` on this step (recorded).
        use_default_validation: evaluate on the validation splits of the caches while training.
        resources: accelerator config (``marin_resources.accelerators``): CPU/GPU/TPU request.
        validation_sets: extra caches evaluated during training (weight 0).
    """
    if isinstance(tokenized, MixtureData):
        components, weights = dict(tokenized.components), dict(tokenized.weights)
    elif isinstance(tokenized, Mapping):
        components, weights = dict(tokenized), {k: 1.0 for k in tokenized}
    else:
        components, weights = {"data": tokenized}, {"data": 1.0}
    for vname, value in (validation_sets or {}).items():
        if vname in components:
            raise ValueError(f"validation set {vname!r} clashes with a training component")
        components[vname] = value
    return ExecutorStep(
        name=f"checkpoints/{name}",
        fn=run_training,
        config=TrainConfig(
            output_path=this_output_path(),
            components={k: _as_component(v) for k, v in components.items()},
            weights=versioned(weights),
            model=versioned(model_config),
            train=versioned(train_config),
            tags=tuple(tags),
            eval_harness_tasks=tuple(eval_harness_tasks),
            use_default_validation=versioned(use_default_validation),
            accelerator=accelerator_kind(resources),
        ),
        description=f"Levanter training of {name} ({model_config.num_layers} layers, d={model_config.hidden_dim}, "
        f"{train_config.num_train_steps} steps x {train_config.train_batch_size} x {model_config.seq_len} tokens).",
        pip_dependency_groups=["train"],
        resources=resources,
    )


def hf_export_path(train_step: ExecutorStep) -> InputName:
    """The HF export folder of a training step (``<out>/hf``; the last ``step-N`` is used)."""
    return train_step / "hf"
