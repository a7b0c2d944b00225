"""Marin's ``marin.download.filesystem.transfer``: copy a dataset folder (or a sample of its files) as a step.

``transfer_files(TransferConfig(input_path, output_path, num_random_files=None, filetype="jsonl.zst"))`` copies
every ``**/*.<filetype>`` file below ``input_path`` -- or ``num_random_files`` of them, chosen by a fixed seed
so a rerun picks the same -- to the same relative path below ``output_path``, local or ``gs://`` either side.
Each file is copied atomically and a file already there is kept (a resumed attempt copies only the rest).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.core.shard_stage import find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import atomic_write_bytes, exists, join_path, read_bytes


@dataclass(frozen=True)
class TransferConfig:
    """Attributes:
    input_path: the folder to copy from.
    output_path: where the files go (same relative paths).
    num_random_files: copy this many files, drawn with a fixed seed (None: all).
    filetype: the suffix of the files copied.
    """

    input_path: StepPath
    output_path: StepPath
    num_random_files: int | None = None
    filetype: str = "jsonl.zst"


def transfer_files(config: TransferConfig) -> dict[str, Any]:
    """Step function (Marin's name): copy the files; returns counts.

    Raises:
        FileNotFoundError: no ``*.<filetype>`` file below ``input_path``.
    """
    input_path, output_path = step_path(config.input_path), step_path(config.output_path)
    files = find_shards(input_path, "." + config.filetype.lstrip("."))
    if not files:
        raise FileNotFoundError(f"no *.{config.filetype} files below {config.input_path} to transfer")
    if config.num_random_files is not None and config.num_random_files < len(files):
        files = sorted(random.Random(0).sample(files, config.num_random_files))
    base = input_path.rstrip("/") + "/"
    copied = kept = 0
    for path in files:
        target = join_path(output_path, path[len(base) :])
        if exists(target):
            kept += 1
            continue
        data = read_bytes(path)
        if data is None:
            raise FileNotFoundError(f"{path} disappeared while transferring {config.input_path}")
        atomic_write_bytes(target, data)
        copied += 1
    return {"files": len(files), "copied": copied, "already_there": kept}
