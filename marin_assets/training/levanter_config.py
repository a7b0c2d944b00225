"""Our training configs as Levanter's ``TrainLmConfig`` (and the YAML ``train_lm`` reads), offline only."""

from __future__ import annotations

import enum
import hashlib
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from marin_assets.core.documents import as_path_list
from marin_assets.execution.storage import is_local, join_path
from marin_assets.processing.tokenize.levanter_cache import cache_split_stats, read_ledger
from marin_assets.training.train_config import (
    LlamaModelConfig,
    TrainConfig,
)

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
    from levanter.compat.hf_checkpoints import load_tokenizer
    from transformers import LlamaConfig as HfLlamaConfig

    tok = load_tokenizer(tokenizer)  # AutoTokenizer that also reads gs:// (fsspec) tokenizer folders
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


def use_wandb() -> bool:
    """True when W&B tracking is on: a key is set and W&B is not disabled."""
    # W&B only when the user has set a key and did not disable it; the key stays in the env.
    return bool(os.environ.get("WANDB_API_KEY")) and os.environ.get("WANDB_MODE", "").lower() != "disabled"


def cpu_trainer_overrides(accelerator: str) -> dict[str, Any]:
    """``TrainerConfig`` settings that make a CPU run cheaper without changing what it computes.

    Levanter's defaults suit accelerator runs: a watch hook (grad/param norms every 10 steps) and
    the jaxpr/HLO of each compiled step written as artifacts. On CPU the hook costs a second
    compile of the train step (Levanter compiles a with-hooks and a without-hooks variant) and the
    artifacts two extra traces per variant -- together about a minute of the quickstart's training
    on a busy 2-core machine, as long as 30 of its steps. Losses, checkpoints and exports are
    unchanged; GPU/TPU runs keep Levanter's defaults.
    """
    if accelerator != "cpu":
        return {}
    from levanter.callbacks.watch import WatchConfig

    return {"watch": WatchConfig(interval=0), "log_jaxprs": False, "log_xla_hlo": False}


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
    if use_wandb():
        from levanter.tracker.wandb import WandbConfig

        trackers = (
            JsonLoggerConfig(),
            WandbConfig(project=os.environ.get("WANDB_PROJECT", "marin"), tags=list(config.tags)),
        )
    model = levanter_llama_config(config.model, reference, tokenizer)
    steps_per_eval = train.steps_per_eval if config.use_default_validation else train.num_train_steps * 10 + 1
    trainer = TrainerConfig(
        **cpu_trainer_overrides(config.accelerator),
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
