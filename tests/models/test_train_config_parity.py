"""The training spec against Levanter's own dataclasses: every spec field (but the few ``OURS``) is a field
of its Levanter class with a type Levanter accepts, and every ``SimpleTrainConfig`` field reaches the
Levanter config the training subprocess writes."""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from collections.abc import Mapping, Sequence

import pytest

from tests.models.test_train_api import inputs, marin_step, resolved, written_yaml  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(300)


def _levanter_class(ref: str) -> type:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _spec_classes() -> list[type]:
    from marin_assets.training import train_config

    return [
        train_config.SourceSpec,
        train_config.MixtureSpec,
        train_config.TrainerSpec,
        train_config.OptimizerSpec,
        train_config.LmTrainSpec,
        train_config.LlamaModelConfig,
    ]


def _hints(cls: type) -> dict[str, object]:
    """The spec's resolved annotations (its Levanter types are imported only for type checkers)."""
    import levanter.callbacks.watch as watch
    import levanter.data.text as text
    import levanter.distributed as distributed
    import levanter.models.lm_model as lm_model
    import levanter.optim as optim
    import levanter.schedule as schedule

    from marin_assets.eval_data.task_data import EvalTask
    from marin_assets.execution.step import InputName, StepPath
    from marin_assets.training import train_config

    names = dict(vars(train_config))
    names.update(
        WatchConfig=watch.WatchConfig,
        LmDatasetFormatBase=text.LmDatasetFormatBase,
        LMMixtureDatasetConfig=text.LMMixtureDatasetConfig,
        DistributedConfig=distributed.DistributedConfig,
        LmConfig=lm_model.LmConfig,
        OptimizerConfig=optim.OptimizerConfig,
        ScheduleStep=schedule.ScheduleStep,
        EvalTask=EvalTask,
        InputName=InputName,
        StepPath=StepPath,
    )
    return typing.get_type_hints(cls, globalns=names)


def _members(tp: object) -> list[object]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return list(typing.get_args(tp))
    return [tp]


def accepts(levanter_type: object, ours: object) -> bool:
    """Whether a value of our type is a valid value of Levanter's field type.

    None in ours means "Levanter's default" and an ``InputName`` / ``OutputName`` (a ``StepPath``'s
    placeholders) is resolved to a path before the subprocess runs: they are left out. A spec class
    stands for its Levanter class.
    """
    from marin_assets.execution.step import InputName, OutputName

    for member in _members(ours):
        if member in (type(None), InputName, OutputName):
            continue
        if isinstance(member, type) and hasattr(member, "LEVANTER"):
            member = _levanter_class(member.LEVANTER)
        if not any(_accepts_one(lev, member) for lev in _members(levanter_type)):
            return False
    return True


def _accepts_one(lev: object, ours: object) -> bool:
    if lev is typing.Any:
        return True
    lev_origin, our_origin = typing.get_origin(lev), typing.get_origin(ours)
    if lev_origin is typing.Literal or our_origin is typing.Literal:
        return lev_origin is our_origin and set(typing.get_args(ours)) <= set(typing.get_args(lev))
    if lev_origin is not None or our_origin is not None:
        families = [(list, tuple, Sequence), (dict, Mapping)]
        lo, oo = lev_origin or lev, our_origin or ours
        same = lo is oo or any(lo in fam and oo in fam for fam in families)
        if not same and not (isinstance(oo, type) and isinstance(lo, type) and issubclass(oo, lo)):
            return False
        # tuple[X, ...] is a sequence of X (a hashable list in a frozen spec)
        la, oa = (tuple(a for a in typing.get_args(tp) if a is not Ellipsis) for tp in (lev, ours))
        return not la or not oa or (len(la) == len(oa) and all(accepts(a, b) for a, b in zip(la, oa, strict=True)))
    if isinstance(lev, type) and isinstance(ours, type):
        return issubclass(ours, lev) or (lev is float and ours is int)
    return lev == ours


@pytest.mark.parametrize("spec", _spec_classes(), ids=lambda cls: cls.__name__)
def test_every_spec_field_is_a_levanter_field_of_an_accepted_type(spec):
    levanter = _levanter_class(spec.LEVANTER)
    theirs = typing.get_type_hints(levanter)
    ours = _hints(spec)
    fields = [f.name for f in dataclasses.fields(spec)]
    assert set(spec.OURS) <= set(fields), "OURS names a field the spec does not have"
    for name in fields:
        if name in spec.OURS:  # converted by hand, as the spec's OURS says
            continue
        assert name in theirs, f"{spec.__name__}.{name} is not a field of {levanter.__name__}"
        assert accepts(theirs[name], ours[name]), f"{spec.__name__}.{name}: {ours[name]} vs Levanter's {theirs[name]}"


def test_the_checker_rejects_what_levanter_would_not_take():
    """The type comparison is not vacuous."""
    assert not accepts(int, str)
    assert not accepts(int | None, list[int])
    assert not accepts(dict[str, float], dict[str, str])
    assert accepts(float, int | None) and accepts(int | list[int], list[int])
    assert accepts(list[str], tuple[str, ...]) and not accepts(list[str], tuple[int, ...])


# SimpleTrainConfig field -> (value set, path in the written train_config.yaml, expected value there)
SIMPLE_TRAIN_FIELDS: dict[str, tuple[object, str, object]] = {
    "train_batch_size": (8, "trainer.train_batch_size", 8),
    "num_train_steps": (5, "trainer.num_train_steps", 5),
    "learning_rate": (2e-3, "optimizer.learning_rate", 2e-3),
    "data_seed": (7, "data_seed", 7),
    "weight_decay": (0.01, "optimizer.weight_decay", 0.01),
    "beta1": (0.8, "optimizer.beta1", 0.8),
    "beta2": (0.97, "optimizer.beta2", 0.97),
    "epsilon": (1e-6, "optimizer.epsilon", 1e-6),
    "max_grad_norm": (0.5, "optimizer.max_grad_norm", 0.5),
    "warmup": (0.1, "optimizer.warmup", 0.1),
    "decay": (0.3, "optimizer.decay", 0.3),
    "rewarmup": (0.02, "optimizer.rewarmup", 0.02),
    "lr_schedule": ("linear", "optimizer.lr_schedule", "linear"),
    "min_lr_ratio": (0.05, "optimizer.min_lr_ratio", 0.05),
    "cycle_length": (2, "optimizer.cycle_length", 2),
    "z_loss_weight": (1e-4, "z_loss_weight", 1e-4),
    "ema_beta": (0.99, "trainer.model_averaging.beta", 0.99),
    "skip_bad_steps": (True, "optimizer.skip_bad_steps", True),
    "steps_per_eval": (3, "trainer.steps_per_eval", 3),
    "steps_per_export": (4, "trainer.checkpointer.keep", [{"every": 4}]),
    "steps_per_task_eval": (6, "eval_harness_steps", 6),
    "steps_per_hf_export": (2, "hf_save_steps", 2),
    "per_device_eval_parallelism": (2, "trainer.per_device_eval_parallelism", 2),
    "max_eval_batches": (3, "trainer.max_eval_batches", 3),
    "initialize_from_checkpoint_path": ("CKPT", "trainer.initialize_from", "CKPT"),
    "initialize_from_hf": None,  # exclusive with the checkpoint: test_initialization_fields_are_applied
    "reset_data_loader_on_init": (False, "initialize_from_checkpoint_path", None),
    "allow_partial_checkpoint": (True, "trainer.allow_partial_checkpoint", True),
    "int8": (True, "trainer.quantization.int8", True),
    "optimizer_config": None,  # replaces the optimizer: test_optimizer_config_replaces_adamw
    "watch": ("WATCH", "trainer.watch.interval", 5),
    "train_seq_len": (64, "model.seq_len", 64),
    "per_device_parallelism": (4, "trainer.per_device_parallelism", 4),
    "resources": None,  # where it runs: precision and require_accelerator (test_accelerators.py)
    "pad_tokenizer_to_match_model": None,  # an error naming it (test_train_api.py)
    "mp": ("p=f32,c=bfloat16", "trainer.mp", "compute=bfloat16,params=float32,output=bfloat16"),
    "attn_backend": ("vanilla", "model.attn_backend", "VANILLA"),  # draccus writes the enum name
    "gradient_checkpointing": (False, "model.gradient_checkpointing", False),
    "model_axis_size": (2, "trainer.model_axis_size", 2),
    "fsdp_axis": (("embed", "mlp"), "trainer.fsdp_axis", ["embed", "mlp"]),
    "tensor_parallel_axes": (("heads",), "trainer.tensor_parallel_axes", ["heads"]),
    "replica_ici_axis_size": (2, "trainer.replica_ici_axis_size", 2),
    "replica_dcn_axis_size": (3, "trainer.replica_dcn_axis_size", 3),
    "jax_compilation_cache_dir": ("/tmp/jax-cache-test", "trainer.jax_compilation_cache_dir", "/tmp/jax-cache-test"),
    "distributed": ("DISTRIBUTED", "trainer.distributed.coordinator_address", "127.0.0.1:1234"),
    "xla_flags": None,  # the training process's XLA_FLAGS: test_accelerator_knobs.py
    "progress_timeout_s": None,  # the step's stall limit: test_progress_timeout.py
}


def test_every_simple_train_config_field_reaches_levanter(inputs, tmp_path):  # noqa: F811
    """Each SimpleTrainConfig field, set to a non-default value, is in the written Levanter config."""
    from levanter.callbacks.watch import WatchConfig

    from marin_assets.experiments.simple_train_config import SimpleTrainConfig

    assert set(SIMPLE_TRAIN_FIELDS) == {f.name for f in dataclasses.fields(SimpleTrainConfig)}
    ckpt = str(tmp_path / "ckpt" / "step-3")
    values = {name: spec[0] for name, spec in SIMPLE_TRAIN_FIELDS.items() if spec is not None}
    from levanter.distributed import DistributedConfig

    values.update(
        initialize_from_checkpoint_path=ckpt,
        watch=WatchConfig(interval=5),
        distributed=DistributedConfig(coordinator_address="127.0.0.1:1234"),
    )
    _, step = marin_step(inputs, **values)
    written = written_yaml(resolved(step, str(tmp_path / "prefix")), tmp_path)
    for name, spec in SIMPLE_TRAIN_FIELDS.items():
        if spec is None:
            continue
        node: object = written
        for part in spec[1].split("."):
            node = node[part]  # type: ignore[index]
        assert node == (ckpt if spec[2] == "CKPT" else spec[2]), (name, spec[1], node)


def test_versioned_settings_keep_their_version_keys_and_hashes():
    """A step versioning every SimpleTrainConfig setting hashes as before this layout (pinned: computed by
    the hand-copied spec it replaced), under Levanter's paths (``train_config.optimizer.learning_rate``)."""
    from marin_assets.execution.step import versioned
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.defaults import default_tokenize, default_train
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_assets.training.train_config import TINY_LLAMA
    from marin_resources import CpuOnlyConfig

    settings = dict(
        train_batch_size=4, num_train_steps=3, learning_rate=1e-3, data_seed=1, weight_decay=0.1, beta1=0.8,
        beta2=0.9, epsilon=1e-7, max_grad_norm=2.0, warmup=0.1, decay=0.2, rewarmup=0.0, lr_schedule="linear",
        min_lr_ratio=0.1, cycle_length=2, z_loss_weight=1e-4, ema_beta=0.99, skip_bad_steps=True, steps_per_eval=2,
        steps_per_export=3, steps_per_hf_export=3, per_device_eval_parallelism=2, max_eval_batches=1,
        initialize_from_checkpoint_path="/ckpt", reset_data_loader_on_init=False, allow_partial_checkpoint=True,
        int8=True, train_seq_len=64, per_device_parallelism=2,
    )  # fmt: skip
    simple = SimpleTrainConfig(resources=CpuOnlyConfig(num_cpus=1), **{k: versioned(v) for k, v in settings.items()})
    tokenized = default_tokenize("docs", "/data/docs", "/data/tok")
    every = default_train("every", tokenized, versioned(TINY_LLAMA), simple, tags=("a",), wandb_name="w")
    plain = SimpleTrainConfig(
        resources=CpuOnlyConfig(num_cpus=1), train_batch_size=4, num_train_steps=3, learning_rate=1e-3
    )
    plain_step = default_train("plain", tokenized, versioned(TINY_LLAMA), plain)
    graph = StepGraph([every, plain_step], "/prefix")
    resolved_every = graph.resolved(every)
    keys = resolved_every.version["config"]
    assert keys["train_config.optimizer.learning_rate"] == 1e-3 and keys["train_config.trainer.train_batch_size"] == 4
    assert keys["train_config.trainer.checkpoint_every"] == 3 and keys["train_config.trainer.ema_beta"] == 0.99
    assert resolved_every.hash == "d6a4e4"
    assert graph.resolved(plain_step).hash == "499a92"
