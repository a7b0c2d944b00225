"""Marin's ``experiments/defaults.py``: ``default_tokenize``, ``default_train``, ``lm_data_config``.

Same names, argument names, order and defaults as Marin's, and the same versioning: a tokenize
step versions its tokenizer (``ensure_versioned``) and ``sample_count``; a training step versions
only what the script versioned (typically ``versioned(llama_nano)``) plus its data through the
tokenize steps it depends on -- not the whole train config.

Differences that follow from running offline on this project's engine (documented in
``docs/engine.md``): datasets and tokenizers resolve from local paths or the local Hugging Face
cache; Marin's default validation sets (Paloma) and CORE eval-harness tasks need downloads, so
``use_default_validation`` adds none and ``eval_harness_tasks`` defaults to ``()``; a
``CpuOnlyConfig`` training run runs Levanter in a local subprocess instead of a Ray task.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import Any

from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    VersionedValue,
    ensure_versioned,
    this_output_path,
    unwrap_versioned_value,
)
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.processing.tokenize import (
    HfDatasetSpec,
    TokenizeConfig,
    lm_data_config,
    lm_mixture_data_config,
    tokenize,
)
from marin_assets.training.training import (
    OptimizerSettings,
    TrainerSettings,
    TrainLmConfig,
    TrainLmOnPodConfig,
    run_levanter_train_lm,
)
from marin_resources.resource_config import CpuOnlyConfig

logger = logging.getLogger(__name__)

__all__ = [
    "HfDatasetSpec",
    "default_tokenize",
    "default_train",
    "lm_data_config",
    "lm_mixture_data_config",
]


def _is_hf_dataset_id(dataset: Any) -> bool:
    """Marin's test: ``org/name`` that is not an existing path."""
    return isinstance(dataset, str) and dataset.count("/") == 1 and not os.path.exists(dataset)


def default_tokenize(
    name: str,
    dataset: InputName | ExecutorStep | str | HfDatasetSpec,
    tokenizer: str,
    format: Any = None,  # noqa: A002 - Marin's argument name
    *,
    sample_count: int | VersionedValue[int] | None = None,
    is_validation: bool = False,
) -> ExecutorStep:
    """A step ``tokenized/<name>`` that builds a Levanter cache of ``dataset`` with ``tokenizer``.

    Args:
        name: forms the output path (``tokenized/`` is prepended).
        dataset: a step, an ``InputName``, a local path, a Hugging Face dataset id (``org/name``, from
            the local cache) or an ``HfDatasetSpec``.
        tokenizer: a tokenizer name in the local Hugging Face cache, or a local tokenizer directory.
        format: a Levanter dataset format (``TextLmDatasetFormat()`` when None, as Marin's default).
        sample_count: tokenize only the first N records per split (versioned).
        is_validation: put the dataset in the ``validation`` split.
    """
    hf_dataset = None
    if isinstance(dataset, HfDatasetSpec):
        hf_dataset = dataset
    elif _is_hf_dataset_id(dataset):
        hf_dataset = HfDatasetSpec(id=dataset)
    paths = [] if hf_dataset is not None else [dataset]
    config = TokenizeConfig(
        train_paths=[] if is_validation else paths,
        validation_paths=paths if is_validation else [],
        cache_path=this_output_path(),
        tokenizer=ensure_versioned(tokenizer),
        format=format,
        sample_count=ensure_versioned(sample_count) if sample_count is not None else None,
        hf_dataset=hf_dataset,
    )
    return ExecutorStep(
        name=os.path.join("tokenized", name),
        description=f"Tokenize raw text using the {unwrap_versioned_value(tokenizer)} tokenizer.",
        fn=tokenize,
        config=config,
    )


def _prepare_data_config(tokenized: Any, use_default_validation: bool) -> Any:
    """The mixture to train on (a single tokenize step becomes a one-component mixture)."""
    if use_default_validation:
        logger.debug("no default validation sets offline (Marin's are Paloma downloads); using the caches' own")
    if isinstance(tokenized, (InputName, ExecutorStep)):
        return lm_data_config(training_set=tokenized)
    return tokenized


# SimpleTrainConfig fields the local Levanter launcher does not apply yet (warned about when set).
NOT_APPLIED_FIELDS = (
    "beta1",
    "beta2",
    "epsilon",
    "max_grad_norm",
    "decay",
    "rewarmup",
    "cycle_length",
    "z_loss_weight",
    "ema_beta",
    "skip_bad_steps",
    "steps_per_task_eval",
    "per_device_eval_parallelism",
    "initialize_from_checkpoint_path",
    "initialize_from_hf",
    "allow_partial_checkpoint",
    "int8",
    "optimizer_config",
    "watch",
    "pad_tokenizer_to_match_model",
)


def _not_applied(train_config: SimpleTrainConfig) -> dict[str, Any]:
    defaults = {f.name: f.default for f in dataclasses.fields(SimpleTrainConfig)}
    return {
        name: getattr(train_config, name)
        for name in NOT_APPLIED_FIELDS
        if unwrap_versioned_value(getattr(train_config, name)) != defaults[name]
    }


def default_train(
    name: str,
    tokenized: InputName | ExecutorStep | Any,
    model_config: Any,
    train_config: SimpleTrainConfig,
    tags: Sequence[str] = (),
    use_default_validation: bool = True,
    eval_harness_tasks: Sequence[Any] = (),
    wandb_name: str | None = None,
    wandb_group: str | None = None,
    override_output_path: str | None = None,
) -> ExecutorStep:
    """A step ``checkpoints/<name>`` training a Levanter language model.

    Args:
        name: forms the output path (``checkpoints/`` is prepended).
        tokenized: a tokenize step / ``InputName``, or a mixture from ``lm_mixture_data_config``.
        model_config: a Levanter ``LlamaConfig`` (e.g. ``llama_nano``), usually ``versioned(...)``.
        train_config: :class:`SimpleTrainConfig`; only the values it wraps in ``versioned`` enter the
            version, as in Marin.
        tags: tracker tags.
        use_default_validation: Marin adds its default validation sets; none exist offline.
        eval_harness_tasks: lm-eval tasks; run them with an evaluation step after training here.
        wandb_name / wandb_group: W&B run name and group (used when W&B is enabled).
        override_output_path: a fixed output path instead of ``<prefix>/checkpoints/<name>-<hash>``.
    """
    if eval_harness_tasks:
        logger.warning("%s: eval_harness_tasks are not run during training here; add an evaluation step", name)
    not_applied = _not_applied(train_config)
    if not_applied:
        logger.warning(
            "%s: these SimpleTrainConfig settings are not applied by the local launcher: %s", name, not_applied
        )
    data = _prepare_data_config(tokenized, use_default_validation)
    model = unwrap_versioned_value(model_config)
    train_length = train_config.train_seq_len or model.seq_len
    if train_length > model.seq_len:
        raise ValueError(f"train_length {train_length} exceeds model seq_len {model.seq_len}.")
    if train_config.initialize_from_hf is not None and train_config.initialize_from_checkpoint_path is not None:
        raise ValueError("Cannot specify both initialize_from_checkpoint_path and initialize_from_hf")
    if train_config.steps_per_hf_export is None:
        hf_save_steps = train_config.steps_per_export
    elif train_config.steps_per_hf_export == -1:
        hf_save_steps = None
    else:
        hf_save_steps = train_config.steps_per_hf_export
    inner = TrainLmConfig(
        data=data,
        trainer=TrainerSettings(
            train_batch_size=train_config.train_batch_size,
            num_train_steps=train_config.num_train_steps,
            steps_per_eval=train_config.steps_per_eval if train_config.steps_per_eval is not None else 1000,
            max_eval_batches=train_config.max_eval_batches,
            checkpoint_every=train_config.steps_per_export,
            tags=tuple(tags),
            wandb_name=wandb_name,
            wandb_group=wandb_group if wandb_group is not None else os.environ.get("WANDB_GROUP"),
        ),
        model=model_config,
        optimizer=OptimizerSettings(
            learning_rate=train_config.learning_rate,
            weight_decay=train_config.weight_decay,
            beta1=train_config.beta1,
            beta2=train_config.beta2,
            epsilon=train_config.epsilon,
            max_grad_norm=train_config.max_grad_norm,
            warmup=train_config.warmup,
            decay=train_config.decay,
            rewarmup=train_config.rewarmup,
            lr_schedule=train_config.lr_schedule,
            min_lr_ratio=train_config.min_lr_ratio,
            cycle_length=train_config.cycle_length,
            skip_bad_steps=train_config.skip_bad_steps,
        ),
        train_seq_len=train_length,
        hf_save_steps=hf_save_steps,
        data_seed=train_config.data_seed,
        z_loss_weight=train_config.z_loss_weight,
        initialize_from_hf=train_config.initialize_from_hf,
        initialize_from_checkpoint_path=train_config.initialize_from_checkpoint_path,
    )
    resources = train_config.resources
    tokens = unwrap_versioned_value(train_config.train_batch_size) * train_config.num_train_steps * train_length
    return ExecutorStep(
        name=os.path.join("checkpoints", name),
        description=(
            f"Train a {model.num_layers}-layer d={model.hidden_dim} model for {train_config.num_train_steps} (steps) * "
            f"{unwrap_versioned_value(train_config.train_batch_size)} (batch_size) * {train_length} (train_seq_len) "
            f"= {tokens} tokens."
        ),
        fn=run_levanter_train_lm,
        config=TrainLmOnPodConfig(train_config=inner, resources=resources, output_path=this_output_path()),
        override_output_path=override_output_path,
        # CPU-only training runs Levanter in a local subprocess; accelerators go through Ray.
        resources=None if resources is None or isinstance(resources, CpuOnlyConfig) else resources,
    )
