"""The vocabulary of an experiment: steps and the placeholders their configs hold.

An :class:`ExecutorStep` couples a name, a function and a frozen dataclass config. Config fields
may hold placeholders that the executor replaces with concrete values just before the function
runs:

* ``versioned(value)`` -- a value that enters the step's version (hash);
* ``output_path_of(step, "sub")`` / ``InputName`` / ``step / "sub"`` -- a path inside an earlier
  step's output; the earlier step becomes a dependency and its version enters ours;
* ``InputName.hardcoded(path)`` -- a fixed path that enters the version as a string;
* ``this_output_path("sub")`` / ``OutputName`` -- a path inside this step's own output;
* ``this_partition()`` -- the partition key, for steps partitioned by data drop.

This module has no Dagster import and no I/O: it only describes.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeAlias, TypeVar

# The resource configs a step may name (marin_resources imports nothing of ours; no Ray import).
from marin_resources.accelerators import Accelerator
from marin_resources.resource_config import CpuOnlyConfig, ResourceConfig, TpuPodConfig

T = TypeVar("T")

PartitionSource: TypeAlias = Sequence[str] | Callable[[str], Sequence[str]]
"""The keys of a partition set, or a callable ``prefix -> keys``."""

# A step name becomes part of a path (``<prefix>/<name>-<hash>``), so it is restricted to
# path-safe components: no traversal, no absolute paths, no control characters.
_NAME_COMPONENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}$")
MAX_NAME_LENGTH = 512


def validate_step_name(name: str) -> str:
    """Return ``name`` if it is a safe relative path of name components, else raise ValueError."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"step name must be a non-empty string, got {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"step name is longer than {MAX_NAME_LENGTH} characters: {name[:40]!r}...")
    for part in name.split("/"):
        if part in ("", ".", "..") or not _NAME_COMPONENT.match(part):
            raise ValueError(
                f"unsafe step name {name!r}: each '/'-separated part must match "
                f"{_NAME_COMPONENT.pattern} (no '..', no leading '/', no control characters)"
            )
    return name


def validate_partition_key(key: str) -> str:
    """Return ``key`` if it can be used as a single path component, else raise ValueError."""
    if not isinstance(key, str) or not _NAME_COMPONENT.match(key) or key in (".", ".."):
        raise ValueError(
            f"unsafe partition key {key!r}: must match {_NAME_COMPONENT.pattern} "
            "(one path component, no traversal, no control characters)"
        )
    return key


@dataclass(frozen=True)
class VersionedValue(Generic[T]):
    """A config value that is part of the step's version."""

    value: T


def versioned(value: T) -> VersionedValue[T]:
    """Mark ``value`` as part of the step's version: changing it changes the output path."""
    if isinstance(value, VersionedValue):
        raise ValueError("value is already versioned (use ensure_versioned to accept both)")
    reference = _step_reference_in(value)
    if reference is not None:
        # Marin rejects this too: a path to another step is a dependency, and its version already
        # enters ours through DEP[i]; versioning it (or a list holding it) would hide the dependency.
        raise ValueError(
            f"cannot version a reference to another step ({reference!r:.120}); pass output_path_of(step) unwrapped"
        )
    return VersionedValue(value)


def _step_reference_in(value: Any, depth: int = 0) -> Any:
    """The first ``InputName`` / ``ExecutorStep`` in ``value`` or its lists, tuples, sets and dicts."""
    if isinstance(value, (InputName, ExecutorStep)):
        return value
    if depth < 8 and isinstance(value, (list, tuple, set, frozenset, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            found = _step_reference_in(item, depth + 1)
            if found is not None:
                return found
    return None


def ensure_versioned(value: VersionedValue[T] | T) -> VersionedValue[T]:
    """``value`` as a versioned value: returned as is when it already is one."""
    return value if isinstance(value, VersionedValue) else VersionedValue(value)


def unwrap_versioned_value(value: VersionedValue[T] | T) -> T:
    """The plain value of ``value`` (itself when it is not versioned)."""
    return value.value if isinstance(value, VersionedValue) else value


@dataclass(frozen=True)
class InputName:
    """A path inside the output of ``step`` (or a hardcoded path when ``step`` is None).

    ``block_on_step=False`` (see :meth:`nonblocking`) keeps the dependency in the version but
    does not wait for the step to finish -- e.g. reading a checkpoint of a running training job.
    ``all_partitions=True`` (see :meth:`partitions`) lets an unpartitioned consumer read every
    partition of a partitioned step; it resolves to a list of paths, one per partition.
    ``partition`` (see :meth:`at_partition`) reads one fixed partition; the key enters the version.
    """

    step: ExecutorStep | None
    name: str | None = None
    block_on_step: bool = True
    all_partitions: bool = False
    partition: str | None = None

    def cd(self, name: str) -> InputName:
        """Return the path ``name`` below this one."""
        joined = f"{self.name.rstrip('/')}/{name}" if self.name else name
        return replace(self, name=joined)

    def __truediv__(self, other: str) -> InputName:
        return self.cd(other)

    def nonblocking(self) -> InputName:
        """Depend on the step's version without waiting for it to finish."""
        return replace(self, block_on_step=False)

    def partitions(self) -> InputName:
        """Consume every partition of a partitioned step (resolves to a sorted list of paths)."""
        return replace(self, all_partitions=True)

    def at_partition(self, key: str) -> InputName:
        """Consume one fixed partition of a partitioned step (e.g. a reference drop)."""
        return replace(self, partition=validate_partition_key(key))

    @staticmethod
    def hardcoded(path: str) -> InputName:
        """A fixed path (not produced by a step); it enters the version as a string."""
        return InputName(step=None, name=path)


def output_path_of(step: ExecutorStep, name: str | None = None) -> InputName:
    """The path ``name`` inside ``step``'s output (the whole output when ``name`` is None)."""
    return InputName(step=step, name=name)


@dataclass(frozen=True)
class OutputName:
    """A path inside the output of the step whose config holds it."""

    name: str | None = None


def this_output_path(name: str | None = None) -> OutputName:
    """The path ``name`` inside the current step's output (the output itself when None)."""
    return OutputName(name=name)


# A constant usable as a dataclass field default (Marin's ``THIS_OUTPUT_PATH``).
THIS_OUTPUT_PATH = OutputName(None)


StepPath: TypeAlias = str | InputName | OutputName
"""A path field of a step config: a local path or ``gs://`` URL, or a placeholder (``output_path_of``,
``this_output_path``) that the executor replaces with one before the step function runs. Like every
config field, it may also be wrapped in ``versioned(...)``."""

StepResources: TypeAlias = Accelerator | ResourceConfig | CpuOnlyConfig | TpuPodConfig | str | Mapping[str, Any]
"""Where a step runs: an accelerator config (``marin_resources.accelerators``), one of Marin's resource
configs (``ResourceConfig.with_cpu()``, ``CpuOnlyConfig``, ``TpuPodConfig``), a spec string
(``"tpu:v4-8"``) or a dict of them."""


@dataclass(frozen=True)
class PartitionKeyName:
    """Placeholder for the partition key a partitioned step is running for."""


def this_partition() -> PartitionKeyName:
    """The partition key of the current run of a partitioned step."""
    return PartitionKeyName()


_MAX_DEFINING_FRAMES = 64
_DEFINITION_COUNTER = itertools.count(1)
# Module name -> its globals, for modules executed without being registered in ``sys.modules``
# (``spec_from_file_location`` + ``exec_module``): where a step is kept is looked up there.
_DEFINING_GLOBALS: dict[str, dict[str, Any]] = {}


def defining_globals(module: str) -> dict[str, Any] | None:
    """The globals of a module named in :attr:`ExecutorStep.defined_in` (None when unknown)."""
    loaded = sys.modules.get(module)
    if loaded is not None and module != "__main__":
        return vars(loaded)
    return _DEFINING_GLOBALS.get(module)


def _modules_being_defined() -> tuple[str, ...]:
    """``__name__`` of each module-level frame on the stack (innermost first), above the caller's caller.

    A step built by ``dataclasses.replace`` in a sweep script is defined by the sweep, not by the
    script its original came from: the stack says who is executing, the original's value does not.
    """
    modules: list[str] = []
    frame = sys._getframe(2)  # skip this helper and __post_init__
    for _ in range(_MAX_DEFINING_FRAMES):
        if frame is None:
            break
        if frame.f_code.co_name == "<module>":
            name = frame.f_globals.get("__name__")
            if isinstance(name, str) and name not in modules:
                modules.append(name)
                if sys.modules.get(name) is None or name == "__main__":
                    _DEFINING_GLOBALS[name] = frame.f_globals
        frame = frame.f_back
    return tuple(modules)


@dataclass(frozen=True)
class ExecutorStep(Generic[T]):
    """One unit of an experiment.

    Attributes:
        name: path-like name; the output lives at ``<prefix>/<name>-<hash>``.
        fn: called with the resolved config. A Ray remote function runs on Ray.
        config: frozen dataclass whose fields may hold the placeholders of this module.
        description: shown in the experiment record and as the Dagster asset description.
        override_output_path: fixed output path (relative paths are under the prefix).
        pip_dependency_groups: optional-dependency groups of this project, or pip requirements,
            installed in the Ray runtime env of the step.
        resources: an accelerator config (``marin_resources.accelerators``) -- the step runs as a
            Ray task requesting these resources. Does not enter the version.
        partitioned_by: name of a dynamic partition set (e.g. ``"drops"``); the step then runs once
            per partition into ``<output>/<partition>/``. Does not enter the version.
        sequential_partitions: partition ``k`` waits for partition ``k-1`` (sorted keys) of the same
            step -- for incremental steps such as dedup against every earlier drop.
        partition_source: where the keys of ``partitioned_by`` come from, declared by the step that
            reads the data: a callable ``prefix -> keys`` (e.g. a landing zone's valid drops,
            ``marin_assets.landing.zone.LandingDrops``) or a list of keys. Keys given to the
            experiment or ``executor_main`` win. Does not enter the version.
        watched: whether people watch this step run (a Dagster UI run gives it an op of its own: its
            bar on the run's timeline, its logs, retry, re-execution and termination). None: decided
            from the step by the UI's glue (tokenization, training, evaluation, an accelerator; see
            ``docs/dagster.md``). Does not enter the version.
    """

    name: str
    fn: Callable[[T], Any]
    config: T
    description: str | None = None
    override_output_path: str | None = None
    pip_dependency_groups: list[str] | None = None
    resources: StepResources | None = None
    partitioned_by: str | None = None
    sequential_partitions: bool = False
    partition_source: PartitionSource | None = None
    watched: bool | None = None

    # Not fields (no annotation): they never enter the version, equality or ``replace`` arguments.
    definition_order = 0
    """Order in which steps were built in this process: of identical steps, the first is the definition."""
    defined_in = ()
    """Modules whose top level was executing when the step was built, innermost first: a step made
    by ``train_small.py`` (directly or through a helper it calls) names ``train_small`` first. The
    code location shows a shared step in the group of the script that defines it."""

    def __post_init__(self) -> None:
        validate_step_name(self.name)
        if self.partitioned_by is not None:
            validate_partition_key(self.partitioned_by)
        elif self.partition_source is not None:
            raise ValueError(f"step {self.name!r} declares a partition_source but no partitioned_by")
        object.__setattr__(self, "defined_in", _modules_being_defined())
        object.__setattr__(self, "definition_order", next(_DEFINITION_COUNTER))

    # Steps are compared by identity: two distinct objects with equal fields are merged by the
    # executor through their version, not through ``==`` (configs may hold unhashable lists).
    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other

    def cd(self, name: str) -> InputName:
        """The path ``name`` inside this step's output."""
        return output_path_of(self, name)

    def __truediv__(self, other: str) -> InputName:
        return self.cd(other)

    def nonblocking(self) -> InputName:
        """This step's output, depended on without waiting for it."""
        return output_path_of(self).nonblocking()

    def as_input_name(self) -> InputName:
        """This step's whole output as an :class:`InputName`."""
        return output_path_of(self)

    def with_output_path(self, output_path: str) -> ExecutorStep[T]:
        """A copy of this step writing to ``output_path`` (relative paths are under the prefix)."""
        return replace(self, override_output_path=output_path)

    def partitions(self) -> InputName:
        """All partitions of this (partitioned) step's output."""
        return output_path_of(self).partitions()

    def at_partition(self, key: str) -> InputName:
        """One fixed partition of this (partitioned) step's output."""
        return output_path_of(self).at_partition(key)
