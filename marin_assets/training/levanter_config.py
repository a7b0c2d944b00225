"""The one place Levanter's ``TrainLmConfig`` is built: :func:`build_levanter_config`.

It takes a resolved :class:`~marin_assets.training.training.TrainLmOnPodConfig` whose
``train_config`` is either the nested :class:`~marin_assets.training.train_config.LmTrainSpec`
(``default_train``, in Levanter's layout: copied into Levanter's classes by field name, no field
listed here, :func:`levanter_fields`) or a Levanter ``TrainLmConfig`` given directly. Both then get the same run-time placement (Marin's
``_update_config_to_use_out_path`` plus what running offline needs): checkpoints and HF exports
under the output path, a run id derived from it, a JSON tracker, concrete cache folders, a local
tokenizer and a local HF reference config for the export. Runs in the training subprocess: it
imports Levanter and JAX.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pathlib
from collections.abc import Mapping
from typing import Any

from marin_assets.core.documents import as_path_list
from marin_assets.execution.attempt import published_path
from marin_assets.execution.step import unwrap_versioned_value
from marin_assets.execution.storage import exists, is_local, join_path, list_dir
from marin_assets.processing.tokenize.tokenize import cache_split_stats, read_ledger, resolve_tokenizer
from marin_assets.training.device_defaults import compilation_cache_dir, defaults_for
from marin_assets.training.hosts import is_primary
from marin_assets.training.train_config import (
    DEFAULT_CHECKPOINTS_PATH,
    DEFAULT_HF_CHECKPOINTS_PATH,
    LlamaModelConfig,
    LmTrainSpec,
    MixtureSpec,
    accelerator_of,
    default_run_id,
    use_wandb,
)


def _u(value: Any) -> Any:
    return unwrap_versioned_value(value)


# ----------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------


def component_caches(
    components: Mapping[str, Any], weights: Mapping[str, float]
) -> tuple[dict[str, str], dict[str, float]]:
    """Flatten partitioned components into one Levanter component per cache, splitting weights.

    ``components`` maps a name to a cache root or a list of roots (one per drop). A list becomes
    ``<name>-<drop>`` components whose weights add up to the component's weight, in proportion to
    each drop's train tokens: drops are concatenated, not re-balanced.
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


def tokenizer_of_caches(caches: Mapping[str, str]) -> str:
    """The tokenizer recorded in the first cache ledger that names one."""
    for path in caches.values():
        for split in ("train", "validation"):
            ledger = read_ledger(join_path(path, split))
            if ledger:
                tok = (ledger.get("metadata", {}).get("preprocessor_metadata") or {}).get("tokenizer")
                if tok:
                    return tok
    raise ValueError(f"cannot find the tokenizer in the ledgers of {list(caches.values())}")


def levanter_data_config(data: Any) -> Any:
    """Levanter's ``LMMixtureDatasetConfig`` reading the caches of ``data`` (a :class:`MixtureSpec` or a
    Levanter mixture): partitioned components flattened, the tokenizer a local (or ``gs://``) folder."""
    from levanter.data.text import LMMixtureDatasetConfig, UrlDatasetSourceConfig

    if isinstance(data, (MixtureSpec, LMMixtureDatasetConfig)):
        components = {name: _u(source.cache_dir) for name, source in data.configs.items()}
        weights = {name: float(_u(w)) for name, w in _u(data.train_weights).items()}
    else:
        raise TypeError(f"train_config.data must be a data mixture (lm_data_config), got {type(data).__name__}")
    caches, flat = component_caches(components, weights)
    if not any(w > 0 for w in flat.values()):
        raise ValueError("train_config.data: at least one component needs a positive weight")
    tokenizer = _u(data.tokenizer)
    tokenizer = resolve_tokenizer(tokenizer) if tokenizer else tokenizer_of_caches(caches)
    originals = dict(data.configs)
    sources = {}
    for name, path in caches.items():
        original = originals.get(name)
        fmt = getattr(original, "format", None)
        sources[name] = UrlDatasetSourceConfig(
            cache_dir=path, train_urls=[], validation_urls=[], **({"format": fmt} if fmt is not None else {})
        )
    shuffle = _u(data.shuffle)
    settings = {
        "tokenizer": tokenizer,
        "cache_dir": None,
        "configs": sources,
        "train_weights": flat,
        "shuffle": shuffle,
        "permutation_type": _u(data.permutation_type) if shuffle else None,
    }
    if isinstance(data, LMMixtureDatasetConfig):
        return dataclasses.replace(data, **settings)
    return LMMixtureDatasetConfig(**settings)


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------


def levanter_model_config(model: Any, train_seq_len: int | None = None) -> Any:
    """Levanter's model config: ours (:class:`LlamaModelConfig`) converted, Levanter's as is;
    ``train_seq_len`` (when set) is the context length trained on."""
    model = _u(model)
    if isinstance(model, LlamaModelConfig):
        from levanter.models.llama import LlamaConfig

        model = LlamaConfig(**levanter_fields(model))
    if train_seq_len is not None and train_seq_len != model.seq_len:
        if train_seq_len > model.seq_len:
            raise ValueError(
                f"SimpleTrainConfig.train_seq_len {train_seq_len} exceeds the model's seq_len {model.seq_len}"
            )
        model = dataclasses.replace(model, seq_len=train_seq_len)
    return model


def accelerated_model(model: Any, attn_backend: str | None, gradient_checkpointing: bool | str | None) -> Any:
    """``model`` with the attention backend (Levanter's ``AttentionBackend`` value) and activation
    recomputation set where given (None keeps the model config's own value)."""
    from levanter.layers.attention import AttentionBackend

    names = {f.name for f in dataclasses.fields(model)}
    settings: dict[str, Any] = {}
    if attn_backend is not None:
        settings["attn_backend"] = AttentionBackend(attn_backend)
    if gradient_checkpointing is not None:
        settings["gradient_checkpointing"] = gradient_checkpointing
    for name, value in settings.items():
        if name not in names:
            raise ValueError(f"{type(model).__name__} has no {name} field: cannot set {name}={value!r}")
    return dataclasses.replace(model, **settings) if settings else model


def resolve_checkpoint_path(path: str) -> str:
    """A checkpoint to start from: a ``step-N`` folder, a ``checkpoints`` folder (its newest step), or
    a training step's output (its ``checkpoints`` folder), as Marin scripts name them."""
    inner = join_path(path, DEFAULT_CHECKPOINTS_PATH)
    if not exists(join_path(path, "metadata.json")) and list_dir(inner):
        return inner
    return path


def reference_checkpoint_dir(output_path: str, run_id: str) -> str:
    """Local folder holding the HF ``config.json`` Levanter's HF exporter starts from."""
    if is_local(output_path):
        return join_path(output_path, "hf_reference")
    return f"/tmp/marin-hf-reference/{run_id}"


def write_reference_checkpoint(path: str, model: Any, tokenizer: str) -> None:
    """Write the HF config of ``model`` (and the tokenizer) to ``path``.

    Levanter's HF export reads the reference checkpoint's config for fields it does not set
    itself; by default that is a hub model, which cannot be fetched here.
    """
    from levanter.compat.hf_checkpoints import load_tokenizer

    tok = load_tokenizer(tokenizer)  # AutoTokenizer that also reads gs:// (fsspec) tokenizer folders
    hf = model.to_hf_config(vocab_size=len(tok))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(hf, key, getattr(tok, key))
    os.makedirs(path, exist_ok=True)
    hf.save_pretrained(path)
    tok.save_pretrained(path)


def use_local_reference(model: Any, reference: str, tokenizer: str) -> Any:
    """``model`` pointing its HF converter at local files (its defaults name hub models).

    Configs with ``reference_checkpoint``/``tokenizer`` fields (Llama, Mistral, ...) get them set;
    for others (``Gpt2Config`` hard-codes ``"gpt2"``) the class's converter is redirected in this
    process, which is the training subprocess.
    """
    names = {f.name for f in dataclasses.fields(model)}
    if {"reference_checkpoint", "tokenizer"} <= names:
        return dataclasses.replace(model, reference_checkpoint=reference, tokenizer=tokenizer)
    cls = type(model)
    if not getattr(cls.hf_checkpoint_converter, "_marin_local", False):
        # The class's own converter resolves its hub reference in the constructor: build ours instead.
        extra = {"ignore_prefix": "transformer"} if cls.__name__ == "Gpt2Config" else {}

        def converter(self: Any, ref_checkpoint: str | None = None) -> Any:
            from levanter.compat.hf_checkpoints import HFCheckpointConverter

            return HFCheckpointConverter(
                type(self), reference_checkpoint=ref_checkpoint or reference, tokenizer=tokenizer, **extra
            )

        converter._marin_local = True  # type: ignore[attr-defined]
        cls.hf_checkpoint_converter = converter
    return model


# ----------------------------------------------------------------------------------------------
# Levanter's classes from the spec (copied by field name; the spec's ``OURS`` fields by hand)
# ----------------------------------------------------------------------------------------------


def levanter_fields(spec: Any) -> dict[str, Any]:
    """The fields of a spec (``TrainerSpec`` ...) under their Levanter names, ``versioned`` values
    unwrapped; None leaves Levanter's default (except the spec's ``KEEP_NONE``), ``OURS`` are left out."""
    keep_none = getattr(spec, "KEEP_NONE", frozenset())
    out: dict[str, Any] = {}
    for f in dataclasses.fields(spec):
        value = _u(getattr(spec, f.name))
        if f.name not in spec.OURS and (value is not None or f.name in keep_none):
            out[f.name] = value
    return out


def _from_spec(spec: LmTrainSpec, accelerator: str) -> Any:
    """Levanter's ``TrainLmConfig`` for ``spec``: every field copied by name, plus the spec's own settings."""
    import jmp
    from levanter.checkpoint import CheckpointerConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.optim import AdamConfig
    from levanter.trainer import TrainerConfig

    t, o = spec.trainer, spec.optimizer
    defaults = defaults_for(accelerator)
    trainer = levanter_fields(t)
    trainer["mp"] = jmp.get_policy(_u(t.mp) or defaults.mp)
    initialize = _u(t.initialize_jax_distributed)
    if initialize is None and trainer.get("distributed") is None:  # a given DistributedConfig is kept as is
        initialize = defaults.initialize_jax_distributed
    if initialize is not None:
        from levanter.distributed import DistributedConfig

        given = trainer.get("distributed") or DistributedConfig()
        trainer["distributed"] = dataclasses.replace(given, initialize_jax_distributed=bool(initialize))
    for name in ("fsdp_axis", "tensor_parallel_axes"):  # tuples in the spec (hashable), lists in Levanter
        if isinstance(trainer.get(name), tuple):
            trainer[name] = list(trainer[name])
    trainer["checkpointer"] = CheckpointerConfig(keep=[dict(every=int(_u(t.checkpoint_every)))])
    if _u(t.int8):
        from haliax.quantization import QuantizationConfig

        trainer["quantization"] = QuantizationConfig(int8=True)
    if _u(t.ema_beta) is not None:
        from levanter.optim.model_averaging import EmaModelAveragingConfig

        trainer["model_averaging"] = EmaModelAveragingConfig(beta=float(_u(t.ema_beta)))
    top = levanter_fields(spec)
    if top.get("initialize_from_checkpoint_path") is not None:
        top["initialize_from_checkpoint_path"] = resolve_checkpoint_path(str(top["initialize_from_checkpoint_path"]))
    if top.get("initialize_from_checkpoint_path") is not None and not _u(spec.reset_data_loader_on_init):
        # Levanter: trainer.initialize_from keeps the data loader position; the TrainLmConfig field resets it.
        trainer["initialize_from"] = top.pop("initialize_from_checkpoint_path")
    init_hf = top.get("initialize_from_hf")
    if init_hf is not None and is_local(str(init_hf)) and not os.path.isdir(str(init_hf)):
        raise FileNotFoundError(
            f"SimpleTrainConfig.initialize_from_hf {init_hf!r} is not a local HF model folder; nothing is "
            "downloaded here: copy the model folder to this machine (or gs://) and pass its path"
        )
    if spec.eval_harness_tasks:
        from levanter.eval_harness import LmEvalHarnessConfig

        from marin_assets.training.eval_harness import levanter_task_spec

        top["eval_harness"] = LmEvalHarnessConfig(task_spec=levanter_task_spec(spec.eval_harness_tasks))
    top.update(
        data=spec.data,  # Levanter's data config is built by levanter_data_config (partitions flattened)
        trainer=TrainerConfig(**trainer),
        model=accelerated_model(
            levanter_model_config(spec.model, _u(spec.train_seq_len)),
            _u(spec.attn_backend),
            _u(spec.gradient_checkpointing),
        ),
        optimizer=_u(o.optimizer_config) if _u(o.optimizer_config) is not None else AdamConfig(**levanter_fields(o)),
    )
    return TrainLmConfig(**top)


# ----------------------------------------------------------------------------------------------
# The one builder
# ----------------------------------------------------------------------------------------------


def build_levanter_config(pod: Any) -> Any:
    """The ``levanter.main.train_lm.TrainLmConfig`` this step runs (``pod`` resolved: no placeholders)."""
    from levanter.callbacks.watch import WatchConfig
    from levanter.distributed import DistributedConfig, RayConfig
    from levanter.main.train_lm import TrainLmConfig
    from levanter.tracker.json_logger import JsonLoggerConfig

    accelerator = accelerator_of(pod.resources)
    spec = pod.train_config
    if isinstance(spec, LmTrainSpec):
        lev = _from_spec(spec, accelerator)
        tags, wandb_name, wandb_group = list(spec.trainer.tags), spec.trainer.wandb_name, spec.trainer.wandb_group
    elif isinstance(spec, TrainLmConfig):
        lev = dataclasses.replace(spec, model=levanter_model_config(spec.model))
        tags, wandb_name, wandb_group = [], None, None
    else:
        raise TypeError(f"TrainLmOnPodConfig.train_config must be a Levanter TrainLmConfig, got {type(spec).__name__}")
    out = str(pod.output_path)
    trainer = lev.trainer
    # From the published output, not the attempt's staging folder: every attempt (a retry, a
    # takeover on another host) continues the same run (W&B resumes it).
    stable = default_run_id(published_path(out))
    run_id = trainer.id or (stable if pod.impute_run_id_from_output_path else None)
    run_id = run_id or os.environ.get("RUN_ID") or stable
    trackers: tuple = (JsonLoggerConfig(),)
    if use_wandb():
        from levanter.tracker.wandb import WandbConfig

        wandb = {"project": os.environ.get("WANDB_PROJECT", "marin"), "tags": tags, "name": wandb_name}
        wandb["group"] = wandb_group or os.environ.get("WANDB_GROUP")
        trackers = (JsonLoggerConfig(), WandbConfig(**{k: v for k, v in wandb.items() if v is not None}))
    placement: dict[str, Any] = {
        "tracker": trackers,
        "id": run_id,
        "log_dir": pathlib.Path(join_path(out, "logs") if is_local(out) else f"/tmp/marin-train-logs/{run_id}"),
        "checkpointer": dataclasses.replace(
            trainer.checkpointer, base_path=join_path(out, DEFAULT_CHECKPOINTS_PATH), append_run_id_to_base_path=False
        ),
        "ray": RayConfig(auto_start_cluster=False),
        "jax_compilation_cache_dir": compilation_cache_dir(trainer.jax_compilation_cache_dir, published_path(out)),
        "require_accelerator": accelerator != "cpu",
    }
    initialize = defaults_for(accelerator).initialize_jax_distributed
    if initialize is not None and trainer.distributed == DistributedConfig():  # only where nothing was set
        placement["distributed"] = DistributedConfig(initialize_jax_distributed=initialize)
    if accelerator == "cpu":
        # Levanter's defaults suit accelerators: its watch hook costs a second compile of the train
        # step on CPU and the jaxpr/HLO artifacts two extra traces per variant -- together about a
        # minute of the quickstart on a busy 2-core machine. What is computed does not change; an
        # explicitly configured watch is kept.
        placement.update(log_jaxprs=False, log_xla_hlo=False)
        if trainer.watch == WatchConfig():
            placement["watch"] = WatchConfig(interval=0)
    data = levanter_data_config(lev.data)
    reference = reference_checkpoint_dir(out, run_id)
    return dataclasses.replace(
        lev,
        data=data,
        trainer=dataclasses.replace(trainer, **placement),
        model=use_local_reference(lev.model, reference, data.tokenizer),
        hf_save_path=join_path(out, DEFAULT_HF_CHECKPOINTS_PATH),
    )


def prepare_training(config: Any, local_yaml: str) -> str:
    """In the training subprocess: the in-training lm-eval tasks checked offline
    (:mod:`marin_assets.training.eval_harness`), Levanter's config for the resolved
    ``TrainLmOnPodConfig`` (built once, here), the reference checkpoint, ``<out>/train_config.yaml``,
    the local YAML Levanter parses and the run's shape (``<local>.plan.json``); returns the local
    YAML's path."""
    import json

    from marin_assets.execution.storage import atomic_write_text
    from marin_assets.training import levanter_hooks
    from marin_assets.training.eval_harness import check_harness_tasks, harness_tasks_of, use_local_tasks

    spec = config.train_config
    if isinstance(spec, LmTrainSpec):
        tasks = list(spec.eval_harness_tasks)
    else:
        tasks = harness_tasks_of(spec.eval_harness) if getattr(spec, "eval_harness", None) is not None else []
    if tasks:
        # Before anything is built or written: a task without local data fails the step untrained.
        use_local_tasks(*check_harness_tasks(tasks, local_yaml))
    lev_config = build_levanter_config(config)
    levanter_hooks.install()  # the last step (and SIGTERM) is checkpointed
    reference = reference_checkpoint_dir(str(config.output_path), lev_config.trainer.id)
    write_reference_checkpoint(reference, lev_config.model, lev_config.data.tokenizer)
    yaml_text = levanter_config_yaml(lev_config)
    if is_primary():  # one writer per run (hosts.py); every host runs the same config
        atomic_write_text(join_path(config.output_path, "train_config.yaml"), yaml_text)
    with open(local_yaml, "w") as handle:
        handle.write(yaml_text)
    trainer = lev_config.trainer
    plan = {"num_train_steps": trainer.num_train_steps, "seq_len": lev_config.model.seq_len}
    plan["train_batch_size"] = trainer.train_batch_size if isinstance(trainer.train_batch_size, int) else 0
    with open(os.path.splitext(local_yaml)[0] + ".plan.json", "w") as handle:
        json.dump(plan, handle)
    return local_yaml


def levanter_config_yaml(lev_config: Any) -> str:
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
