"""Marin's ``marin.core.runtime``: ``TaskConfig`` and the helpers its older stages map files with.

* ``TaskConfig(max_in_flight=1000, task_options=None)``: how many Ray tasks run at once;
* ``RayConfig(address=None)``;
* ``cached_or_construct_output(success_suffix="success", verbose=True)``: a decorator for a
  ``fn(input_file, output_file, ...)`` that skips a file whose ``<output_file>.<suffix>`` ledger
  exists and writes the ledger (JSON: paths, start and end time) after the function returned;
* ``map_files_in_directory(func, input_path, pattern, output_path, task_config, empty_glob_ok)``:
  ``func(input_file, output_file)`` for every file matching ``pattern`` below ``input_path``, at the
  same relative path below ``output_path`` (a ``@ray.remote`` function runs as Ray tasks, at most
  ``max_in_flight`` at once; the result is then the list of object refs, in file order);
* ``map_directories_in_directory`` the same for the direct subfolders;
* ``simple_backpressure(remote_func, tasks, max_in_flight, fetch_local)``: submits the tasks with at
  most ``max_in_flight`` running and yields their refs in submission order.

Every path goes through fsspec (``gs://`` as well as local folders); the ledger is written atomically.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from marin_assets.execution.storage import atomic_write_text, filesystem, join_path
from marin_assets.utils import fsspec_exists, fsspec_glob, fsspec_mkdirs, rebase_file_path

logger = logging.getLogger(__name__)


@dataclass
class RayConfig:
    """Marin's Ray address holder (None: the cluster Ray finds)."""

    address: str | None = None


@dataclass(frozen=True)
class TaskConfig:
    """Marin's task throttling: at most ``max_in_flight`` tasks at once; ``task_options`` go to
    ``.options(...)`` of a Ray remote function."""

    max_in_flight: int | None = 1000
    task_options: dict | None = None


def cached_or_construct_output(success_suffix: str = "success", verbose: bool = True) -> Callable[..., Any]:
    """Make ``fn(input_file_path, output_file_path, ...)`` skip files already done (a ledger file)."""

    def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(input_file_path: str, output_file_path: str, *args: Any, **kwargs: Any) -> Any:
            ledger = f"{output_file_path}.{success_suffix}"
            if fsspec_exists(ledger):
                if verbose:
                    logger.info("already processed, skipping %s", input_file_path)
                return True
            started = datetime.datetime.now(datetime.UTC)
            if verbose:
                logger.info("processing %s -> %s", input_file_path, output_file_path)
            result = func(input_file_path, output_file_path, *args, **kwargs)
            record = {
                "input_file_path": input_file_path,
                "output_file_path": output_file_path,
                "datetime_start": str(started),
                "datetime_end": str(datetime.datetime.now(datetime.UTC)),
            }
            atomic_write_text(ledger, json.dumps(record))
            return result

        return wrapper

    return decorator


def _is_remote(func: Any) -> bool:
    try:
        from ray.remote_function import RemoteFunction
    except ImportError:  # pragma: no cover - ray is a dependency
        return False
    return isinstance(func, RemoteFunction)


def simple_backpressure(
    remote_func: Any,
    task_generator: Iterator[Any],
    max_in_flight: int | None,
    fetch_local: bool,
    *args: Any,
    **kwargs: Any,
) -> Iterator[Any]:
    """Submit ``remote_func.remote(*task, *args, **kwargs)`` per task, at most ``max_in_flight`` unfinished
    at once; yields the object refs in submission order (not completion order)."""
    import ray

    refs: list[Any] = []
    in_flight: list[Any] = []
    for task in task_generator:
        while max_in_flight is not None and len(in_flight) >= max_in_flight:
            _, in_flight = ray.wait(in_flight, num_returns=1, fetch_local=fetch_local)
        ref = remote_func.remote(*task, *args, **kwargs)
        refs.append(ref)
        if max_in_flight is not None:
            in_flight.append(ref)
    yield from refs


def map_files_in_directory(
    func: Callable[..., Any],
    input_path: str,
    pattern: str,
    output_path: str,
    task_config: TaskConfig = TaskConfig(),  # noqa: B008 - frozen, as Marin's default
    empty_glob_ok: bool = False,
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``func(input_file, output_file, *args, **kwargs)`` for every ``input_path/pattern`` file.

    Raises:
        FileNotFoundError: no file matches (unless ``empty_glob_ok``), naming the folder and pattern.
    """
    files = fsspec_glob(os.path.join(input_path, pattern))
    pairs = []
    for file in files:
        target = rebase_file_path(input_path, file, output_path)
        fsspec_mkdirs(os.path.dirname(target))
        pairs.append((file, target))
    if not pairs:
        if not empty_glob_ok:
            raise FileNotFoundError(f"no file in {input_path} matches {pattern!r}")
        logger.warning("no file in %s matches %r", input_path, pattern)
    if _is_remote(func):
        remote = func.options(**task_config.task_options) if task_config.task_options else func
        return simple_backpressure(remote, iter(pairs), task_config.max_in_flight, True, *args, **kwargs)
    return [func(source, target, *args, **kwargs) for source, target in pairs]


def map_directories_in_directory(
    func: Callable[..., Any],
    input_path: str,
    output_path: str,
    task_config: TaskConfig = TaskConfig(),  # noqa: B008 - frozen, as Marin's default
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``func(input_subfolder, output_subfolder, *args, **kwargs)`` for every direct subfolder."""
    fs, root = filesystem(input_path)
    if not fs.exists(root):
        return []
    base = root.rstrip("/") + "/"
    names = sorted(entry["name"] for entry in fs.ls(root, detail=True) if entry["type"] == "directory")
    pairs = []
    for name in names:
        rel = name[len(base) :] if name.startswith(base) else os.path.basename(name.rstrip("/"))
        target = join_path(output_path, rel)
        fsspec_mkdirs(target)
        pairs.append((join_path(input_path, rel), target))
    if _is_remote(func):
        remote = func.options(**task_config.task_options) if task_config.task_options else func
        return simple_backpressure(remote, iter(pairs), task_config.max_in_flight, True, *args, **kwargs)
    return [func(source, target, *args, **kwargs) for source, target in pairs]
