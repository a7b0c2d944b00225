"""Marin's ``experiments/defaults.py``: ``default_download``, ``default_tokenize``, ``default_train``
(and the data mixtures).

Same names, argument names, order and defaults as Marin's, and the same versioning: a tokenize
step versions its tokenizer (``ensure_versioned``) and ``sample_count``; a training step versions
only what the script versioned (typically ``versioned(llama_nano)``) plus its data through the
tokenize steps it depends on -- not the whole train config.

What this project adds, each a keyword Marin scripts do not pass: ``default_tokenize(...,
validation=, writer=)`` (held-out documents in the same cache; the cache writer, ``"marin"`` by
default) and ``default_train(..., validation_sets=)``; ``tokenized`` may also be a dict of
tokenize steps or a partitioned step (every drop's cache). Models may be Levanter configs
(``llama_nano``) or :class:`~marin_assets.training.train_config.LlamaModelConfig`, which needs no
Levanter import to define a step.

Differences that follow from running offline (documented in ``docs/models.md``): datasets and
tokenizers resolve from local paths or the local Hugging Face cache; Marin's default validation
sets (Paloma) need downloads, so ``use_default_validation`` adds none; the in-training lm-eval tasks
(``eval_harness_tasks``, Marin's ``CORE_TASKS`` by default) run when their data is local and fail the
step before training otherwise (``eval_harness_tasks=()`` turns them off); a CPU training run runs
Levanter in a local subprocess instead of a Ray task.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.evaluation.evaluation_config import EvalTaskConfig
from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    VersionedValue,
    ensure_versioned,
    this_output_path,
    unwrap_versioned_value,
)
from marin_assets.experiments.evals.task_configs import CORE_TASKS
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.processing.tokenize import (
    HfDatasetSpec,
    TokenizeConfig,
    lm_data_config,
    lm_mixture_data_config,
    tokenize,
)
from marin_assets.processing.tokenize.data_configs import tokenizer_of
from marin_assets.training.training import (
    LmTrainSpec,
    MixtureSpec,
    OptimizerSpec,
    SourceSpec,
    TrainerSpec,
    TrainLmOnPodConfig,
    accelerator_of,
    run_levanter_train_lm,
)

logger = logging.getLogger(__name__)

__all__ = [
    "HfDatasetSpec",
    "default_download",
    "default_tokenize",
    "default_train",
    "lm_data_config",
    "lm_mixture_data_config",
]


def default_download(
    name: str,
    hf_dataset_id: str,
    revision: str,
    override_output_path: str | None = None,
    **kwargs: Any,
) -> InputName:
    """Marin's ``default_download``: a step copying ``hf_dataset_id@revision`` to its output.

    Marin's signature, config and versioning: nothing is versioned unless the caller passes a
    ``versioned(...)`` value (Marin's hash is the name's, the output path ``<name>-<hash>`` or
    ``override_output_path``); ``kwargs`` go to :class:`DownloadConfig` (``hf_urls_glob``,
    ``append_sha_to_path``, and here ``cache_dir``). Returns the step's ``InputName``, as Marin does.
    The files come from the local Hugging Face cache, never the network: a dataset that is not there
    fails when the step runs, naming it (defining the step checks nothing).
    """
    step = ExecutorStep(
        name=name,
        description=f"Download {hf_dataset_id} revision {revision}",
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=hf_dataset_id,
            revision=revision,
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
            **kwargs,
        ),
        override_output_path=override_output_path,
    )
    return step.as_input_name()


def _is_hf_dataset_id(dataset: Any) -> bool:
    """Marin's test: ``org/name`` that is not an existing path."""
    dataset = unwrap_versioned_value(dataset)
    return isinstance(dataset, str) and dataset.count("/") == 1 and not os.path.exists(dataset)


def _partitioned_by(value: Any) -> str | None:
    step = value if isinstance(value, ExecutorStep) else getattr(value, "step", None)
    if isinstance(value, InputName) and value.all_partitions:
        return None
    return step.partitioned_by if step is not None else None


def _items(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _tokenizer_input(tokenizer: Any) -> Any:
    """A tokenizer step stays a dependency; a name or a path is versioned (Marin's rule)."""
    return tokenizer if isinstance(tokenizer, (ExecutorStep, InputName)) else ensure_versioned(tokenizer)


def default_tokenize(
    name: str,
    dataset: InputName | ExecutorStep | str | HfDatasetSpec | Sequence[Any],
    tokenizer: str | ExecutorStep | InputName,
    format: Any = None,  # noqa: A002 - Marin's argument name
    *,
    sample_count: int | VersionedValue[int] | None = None,
    is_validation: bool = False,
    validation: Any = None,
    writer: Literal["marin", "levanter"] = "marin",
) -> ExecutorStep:
    """A step ``tokenized/<name>`` that builds a Levanter cache of ``dataset`` with ``tokenizer``.

    Args:
        name: forms the output path (``tokenized/`` is prepended).
        dataset: a step, an ``InputName``, a path (local or ``gs://``), a list of them, a Hugging Face
            dataset id (``org/name``, from the local cache) or an ``HfDatasetSpec``. A step
            partitioned by drops makes this step partitioned the same way (one cache per drop).
        tokenizer: a tokenizer name in the local Hugging Face cache, a tokenizer directory, or a
            tokenizer step (``default_tokenizer``).
        format: a Levanter dataset format (``TextLmDatasetFormat()`` when None, as Marin's default).
        sample_count: tokenize only the first N records per split (versioned).
        is_validation: put the dataset in the ``validation`` split.
        validation: held-out documents for the ``validation`` split of the same cache (ours).
        writer: ``"marin"`` (our fast cache writer) or ``"levanter"`` (Levanter's builder, for
            comparison); not versioned, as both store the same tokens.
    """
    hf_dataset = None
    if isinstance(dataset, HfDatasetSpec):
        hf_dataset = dataset
    elif _is_hf_dataset_id(dataset):
        hf_dataset = HfDatasetSpec(id=dataset)
    paths = [] if hf_dataset is not None else _items(dataset)
    partitions = {p for p in (_partitioned_by(x) for x in paths) if p is not None}
    if len(partitions) > 1:
        raise ValueError(f"dataset mixes partition sets {sorted(partitions)}")
    held_out = _items(validation)
    train_paths, validation_paths = ([], paths + held_out) if is_validation else (paths, held_out)
    config = TokenizeConfig(
        train_paths=train_paths,
        validation_paths=validation_paths,
        cache_path=this_output_path(),
        tokenizer=_tokenizer_input(tokenizer),
        format=format,
        sample_count=ensure_versioned(sample_count) if sample_count is not None else None,
        hf_dataset=hf_dataset,
        writer=writer,
    )
    label = tokenizer.name if isinstance(tokenizer, ExecutorStep) else unwrap_versioned_value(tokenizer)
    return ExecutorStep(
        name=os.path.join("tokenized", name),
        description=f"Tokenize raw text using the {label} tokenizer.",
        fn=tokenize,
        config=config,
        pip_dependency_groups=["tokenize"],
        partitioned_by=partitions.pop() if partitions else None,
    )


def _component(value: Any) -> SourceSpec:
    """Like Marin's ``step_to_lm_mixture_component``: the cache plus the documents it was built from."""
    if isinstance(value, str):
        return SourceSpec(cache_dir=InputName.hardcoded(value))
    step = value if isinstance(value, ExecutorStep) else getattr(value, "step", None)
    if isinstance(value, ExecutorStep):
        # every drop of a partitioned cache
        cache_dir = value.partitions() if value.partitioned_by is not None else value.as_input_name()
    else:
        cache_dir = value
    config = getattr(step, "config", None)
    if not isinstance(config, TokenizeConfig) or step.partitioned_by is not None:
        # A partitioned cache's documents are per partition: the caches alone carry the version.
        return SourceSpec(cache_dir=cache_dir)
    return SourceSpec(
        cache_dir=cache_dir, train_urls=_urls(config.train_paths), validation_urls=_urls(config.validation_paths)
    )


def _urls(paths: Any) -> Any:
    """A tokenize config's paths as a component's urls: a ``versioned([...])`` list stays versioned
    (Marin's train step carries it into its version as it is), anything else becomes a list."""
    if isinstance(paths, VersionedValue):
        return paths
    return _items(paths)


def _mixture(tokenized: Any, validation_sets: Mapping[str, Any]) -> Any:
    """The data to train on: a Levanter mixture as given (``lm_mixture_data_config``), or a
    :class:`MixtureSpec` over tokenize steps (one step: weight 1, named after the step; a dict:
    equal weights) that needs no Levanter import."""
    if not isinstance(tokenized, (ExecutorStep, InputName, str, Mapping)):
        if validation_sets:
            raise ValueError("validation_sets: add them to the lm_mixture_data_config mixture (weight 0) instead")
        return tokenized
    if isinstance(tokenized, Mapping):
        components = dict(tokenized)
    else:
        step = tokenized if isinstance(tokenized, ExecutorStep) else getattr(tokenized, "step", None)
        train_name = os.path.basename(step.name) if step is not None else "data"
        components = {train_name: tokenized}
    weights = {name: 1.0 for name in components}
    for name, value in validation_sets.items():
        if name in components:
            raise ValueError(f"validation set {name!r} clashes with a training component")
        components[name] = value
    first = next(iter(components.values()))
    tokenizer = None
    if not isinstance(first, str):
        try:
            tokenizer = tokenizer_of(first)
        except ValueError:
            tokenizer = None  # read from the cache's ledger when training starts
    return MixtureSpec(
        configs={name: _component(value) for name, value in components.items()},
        train_weights=weights,
        tokenizer=tokenizer,
    )


def _simple_train_config(train_config: Any) -> SimpleTrainConfig:
    """``train_config`` as this project's :class:`SimpleTrainConfig`: a team's own copy of Marin's class
    (an older or newer ``experiments/simple_train_config.py``) is read field by field, its values --
    versioned ones included -- kept as they are; fields it lacks take the defaults."""
    if isinstance(train_config, SimpleTrainConfig):
        return train_config
    import dataclasses

    ours = {f.name for f in dataclasses.fields(SimpleTrainConfig)}
    given = {f.name: getattr(train_config, f.name) for f in dataclasses.fields(train_config)}
    ignored = sorted(k for k, v in given.items() if k not in ours and unwrap_versioned_value(v) not in (None, False))
    if ignored:
        logger.warning("train config fields with no counterpart here, not applied: %s", ", ".join(ignored))
    return SimpleTrainConfig(**{k: v for k, v in given.items() if k in ours})


def default_train(
    name: str,
    tokenized: InputName | ExecutorStep | Any,
    model_config: Any,
    train_config: SimpleTrainConfig,
    tags: Sequence[str] = (),
    use_default_validation: bool = True,
    eval_harness_tasks: Sequence[EvalTaskConfig | str] = CORE_TASKS,
    wandb_name: str | None = None,
    wandb_group: str | None = None,
    override_output_path: str | None = None,
    *,
    validation_sets: Mapping[str, Any] | None = None,
) -> ExecutorStep:
    """A step ``checkpoints/<name>`` training a Levanter language model.

    Every ``SimpleTrainConfig`` field lands on its Levanter field (see
    ``marin_assets.training.levanter_config``); only what the script wrapped in ``versioned`` enters
    the version, as in Marin.

    Args:
        name: forms the output path (``checkpoints/`` is prepended).
        tokenized: a tokenize step / ``InputName``, a mixture from ``lm_mixture_data_config``, a dict
            name -> tokenize step (equal weights), or a partitioned tokenize step (every drop).
        model_config: a Levanter model config (``llama_nano``) or a ``LlamaModelConfig``, usually
            ``versioned(...)``.
        train_config: :class:`SimpleTrainConfig`.
        tags: tracker tags.
        use_default_validation: Marin adds its default validation sets (Paloma); none exist offline.
        eval_harness_tasks: lm-eval tasks Levanter's harness runs during training (every
            ``steps_per_task_eval`` steps, default 10000, and at the end), Marin's ``CORE_TASKS`` by
            default; ``EvalTaskConfig`` s or lm-eval names (a group such as ``"mmlu"`` expands to its
            subtasks). Their data must be local (HF cache, shipped tasks, ``$MARIN_EVAL_TASKS_PATH``):
            otherwise the step fails before training, naming the task. ``()``: no in-training evals.
        wandb_name / wandb_group: W&B run name and group (used when W&B is enabled).
        override_output_path: a fixed output path instead of ``<prefix>/checkpoints/<name>-<hash>``.
        validation_sets: name -> tokenize step evaluated during training (weight 0; ours).
    """
    if use_default_validation:
        logger.debug("no default validation sets offline (Marin's are Paloma downloads); using the caches' own")
    tc = _simple_train_config(train_config)
    model = unwrap_versioned_value(model_config)
    train_length = _check_train_config(tc, model)
    spec = LmTrainSpec(
        data=_mixture(tokenized, dict(validation_sets or {})),
        trainer=_trainer_spec(tc, tags, wandb_name, wandb_group),
        model=model_config,
        optimizer=_optimizer_spec(tc),
        train_seq_len=tc.train_seq_len,
        hf_save_steps=_hf_save_steps(tc),
        data_seed=tc.data_seed,
        z_loss_weight=tc.z_loss_weight,
        initialize_from_hf=tc.initialize_from_hf,
        initialize_from_checkpoint_path=tc.initialize_from_checkpoint_path,
        reset_data_loader_on_init=tc.reset_data_loader_on_init,
        eval_harness_tasks=tuple(unwrap_versioned_value(eval_harness_tasks) or ()),
        # Marin's default; a versioned value stays versioned (its version key is Marin's).
        eval_harness_steps=tc.steps_per_task_eval if unwrap_versioned_value(tc.steps_per_task_eval) else 10000,
        attn_backend=tc.attn_backend,
        gradient_checkpointing=tc.gradient_checkpointing,
    )
    resources = tc.resources
    return ExecutorStep(
        name=os.path.join("checkpoints", name),
        description=_train_description(tc, model, train_length),
        fn=run_levanter_train_lm,
        config=TrainLmOnPodConfig(
            train_config=spec,
            resources=resources,
            output_path=this_output_path(),
            progress_timeout_s=tc.progress_timeout_s,
        ),
        override_output_path=override_output_path,
        pip_dependency_groups=["train"],
        # CPU-only training runs Levanter in a local subprocess; accelerators go through Ray.
        resources=None if accelerator_of(resources) == "cpu" else resources,
    )


def _check_train_config(tc: SimpleTrainConfig, model: Any) -> int:
    """Reject settings that cannot apply; returns the training context length."""
    if unwrap_versioned_value(tc.pad_tokenizer_to_match_model):
        raise ValueError(
            "SimpleTrainConfig.pad_tokenizer_to_match_model cannot apply: this Levanter has no such option"
        )
    if (
        unwrap_versioned_value(tc.initialize_from_hf) is not None
        and unwrap_versioned_value(tc.initialize_from_checkpoint_path) is not None
    ):
        raise ValueError("Cannot specify both initialize_from_checkpoint_path and initialize_from_hf")
    train_length = unwrap_versioned_value(tc.train_seq_len) or model.seq_len
    if train_length > model.seq_len:
        raise ValueError(f"train_length {train_length} exceeds model seq_len {model.seq_len}.")
    return train_length


def _hf_save_steps(tc: SimpleTrainConfig) -> Any:
    """Marin's rule: ``steps_per_hf_export`` None follows ``steps_per_export``, -1 turns exports off."""
    steps_per_hf_export = unwrap_versioned_value(tc.steps_per_hf_export)
    if steps_per_hf_export is None:
        return tc.steps_per_export
    return None if steps_per_hf_export == -1 else tc.steps_per_hf_export


def _trainer_spec(
    tc: SimpleTrainConfig, tags: Sequence[str], wandb_name: str | None, wandb_group: str | None
) -> TrainerSpec:
    """Levanter's ``TrainerConfig`` settings of ``tc`` (values passed as given: versioned stays versioned)."""
    return TrainerSpec(
        train_batch_size=tc.train_batch_size,
        num_train_steps=tc.num_train_steps,
        steps_per_eval=tc.steps_per_eval if tc.steps_per_eval is not None else 1000,
        max_eval_batches=tc.max_eval_batches,
        checkpoint_every=tc.steps_per_export,
        per_device_parallelism=tc.per_device_parallelism,
        per_device_eval_parallelism=tc.per_device_eval_parallelism,
        allow_partial_checkpoint=tc.allow_partial_checkpoint,
        int8=tc.int8,
        ema_beta=tc.ema_beta,
        watch=tc.watch,
        tags=tuple(tags),
        wandb_name=wandb_name,
        wandb_group=wandb_group,
        mp=tc.mp,
        model_axis_size=tc.model_axis_size,
        fsdp_axis=tc.fsdp_axis,
        tensor_parallel_axes=tc.tensor_parallel_axes,
        replica_ici_axis_size=tc.replica_ici_axis_size,
        replica_dcn_axis_size=tc.replica_dcn_axis_size,
        jax_compilation_cache_dir=tc.jax_compilation_cache_dir,
        distributed=tc.distributed,
        xla_flags=tc.xla_flags,
    )


def _optimizer_spec(tc: SimpleTrainConfig) -> OptimizerSpec:
    """Levanter's ``AdamConfig`` settings of ``tc`` (or its whole ``optimizer_config``)."""
    return OptimizerSpec(
        learning_rate=tc.learning_rate,
        weight_decay=tc.weight_decay,
        beta1=tc.beta1,
        beta2=tc.beta2,
        epsilon=tc.epsilon,
        max_grad_norm=tc.max_grad_norm,
        warmup=tc.warmup,
        decay=tc.decay,
        rewarmup=tc.rewarmup,
        lr_schedule=tc.lr_schedule,
        min_lr_ratio=tc.min_lr_ratio,
        cycle_length=tc.cycle_length,
        skip_bad_steps=tc.skip_bad_steps,
        optimizer_config=tc.optimizer_config,
    )


def _train_description(tc: SimpleTrainConfig, model: Any, train_length: int) -> str:
    batch = unwrap_versioned_value(tc.train_batch_size)
    steps = unwrap_versioned_value(tc.num_train_steps)
    tokens = batch * steps * train_length if isinstance(batch, int) else None
    return (
        f"Train a {model.num_layers}-layer d={model.hidden_dim} model for {steps} (steps) * "
        f"{batch} (batch_size) * {train_length} (train_seq_len) = {tokens} tokens."
    )


# Names older Marin scripts import from ``experiments.defaults`` (Marin's module imported them from
# ``experiments.llama``); resolved on first use, as the Levanter configs take seconds to import.
_LLAMA_NAMES = ("llama_1_4b", "llama_nano", "llama_150m", "llama_300m", "llama_8b", "compute_num_parameters")


def __getattr__(name: str) -> Any:
    if name == "llama3_tokenizer":
        from marin_assets.experiments.marin_models import llama3_tokenizer

        return llama3_tokenizer
    if name in _LLAMA_NAMES:
        from marin_assets.experiments import llama

        return getattr(llama, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
