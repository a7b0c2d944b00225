"""The step engine: Marin's executor semantics as a library (no Dagster import).

Steps, versions and output paths (``step``, ``versioning``), status and info files (``status``),
leases (``lease``), the runner (``runner``), dry runs (``dry_run``) and the command line
(``executor_main``); Marin's module name ``executor`` maps Marin's names onto them, and
``maintenance`` (``invalidate``, ``gc``) acts on recorded outputs.
"""

from marin_assets.execution.executor_main import executor_main
from marin_assets.execution.runner import (
    ExecutionReport,
    Executor,
    ExecutorError,
    ExecutorOptions,
    StepFailedError,
    StepOutcome,
    run_steps,
)
from marin_assets.execution.secrets import EnvSecret, secret_from_env
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
from marin_assets.execution.versioning import ResolvedStep, StepGraph, hash_version

__all__ = [
    "EnvSecret",
    "THIS_OUTPUT_PATH",
    "ExecutionReport",
    "Executor",
    "ExecutorError",
    "ExecutorOptions",
    "ExecutorStep",
    "InputName",
    "OutputName",
    "ResolvedStep",
    "StepFailedError",
    "StepGraph",
    "StepOutcome",
    "VersionedValue",
    "ensure_versioned",
    "executor_main",
    "hash_version",
    "output_path_of",
    "run_steps",
    "secret_from_env",
    "this_output_path",
    "this_partition",
    "unwrap_versioned_value",
    "versioned",
]
