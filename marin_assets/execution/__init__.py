"""The step engine: Marin's executor semantics as a library (no Dagster import).

Steps, versions and output paths (``step``, ``versioning``), status and info files (``status``),
leases (``lease``), the runner (``runner``), dry runs (``dry_run``) and the command line
(``executor_main``); Marin's module name ``executor`` maps Marin's names onto them, and
``maintenance`` (``invalidate``, ``gc``) acts on recorded outputs.

This package exports what Marin's ``marin.execution`` does (its ``step`` decorator, ``deferred``,
``output``, ``StepContext`` and ``StepRef`` included: ``step_ref``) (``Executor`` is Marin's
``Executor(prefix, executor_info_base_path, description)``; the runner behind it is
``marin_assets.execution.runner.StepRunner``), plus the engine's own names.
"""

# ``step`` is both the submodule and Marin's decorator: the module is callable (``step_ref``).
from marin_assets.execution import step
from marin_assets.execution.executor import Executor, get_executor_step
from marin_assets.execution.executor_main import ExecutorMainConfig, executor_main
from marin_assets.execution.outcomes import (
    ExecutionReport,
    ExecutorError,
    ExecutorOptions,
    StepFailedError,
    StepOutcome,
)
from marin_assets.execution.runner import StepRunner, run_steps
from marin_assets.execution.secrets import EnvSecret, secret_from_env
from marin_assets.execution.status import (
    STATUS_CANCELLED,
    STATUS_DEP_FAILED,
    STATUS_FAILED,
    STATUS_RUNNING,
    STATUS_SUCCESS,
    STATUS_WAITING,
)
from marin_assets.execution.step import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    InputName,
    OutputName,
    VersionedValue,
    ensure_versioned,
    output_path_of,
    this_output_path,
    this_partition,
    unwrap_versioned_value,
    versioned,
)
from marin_assets.execution.step_ref import StepContext, StepRef, deferred, output
from marin_assets.execution.versioning import ResolvedStep, StepGraph, hash_version

__all__ = [
    "STATUS_CANCELLED",
    "STATUS_DEP_FAILED",
    "STATUS_FAILED",
    "STATUS_RUNNING",
    "STATUS_SUCCESS",
    "STATUS_WAITING",
    "EnvSecret",
    "THIS_OUTPUT_PATH",
    "ExecutionReport",
    "Executor",
    "ExecutorError",
    "ExecutorMainConfig",
    "ExecutorOptions",
    "ExecutorStep",
    "InputName",
    "OutputName",
    "ResolvedStep",
    "StepContext",
    "StepRef",
    "StepFailedError",
    "StepGraph",
    "StepOutcome",
    "StepRunner",
    "VersionedValue",
    "deferred",
    "ensure_versioned",
    "executor_main",
    "get_executor_step",
    "hash_version",
    "output",
    "output_path_of",
    "run_steps",
    "secret_from_env",
    "step",
    "this_output_path",
    "this_partition",
    "unwrap_versioned_value",
    "versioned",
]
