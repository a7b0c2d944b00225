"""Marin's ``marin.utilities.executor_utils``: ``ckpt_path_to_step_name``."""

from __future__ import annotations

import re

from marin_assets.execution.step import InputName

_STEP = re.compile(r"^step-(\d+)/?$")
_HUB_ID = re.compile(r"^[^/]+/[^/]+$")
_LEVANTER_RUN = re.compile(r"(^|/)checkpoints/[^/]+/checkpoints(/|$)")


def _step_number(component: str, path: str) -> str:
    match = _STEP.match(component)
    if match is None:
        raise ValueError(f"Invalid path: {path}")
    return match.group(1)


def ckpt_path_to_step_name(path: str | InputName) -> str:
    """A short id for a checkpoint, as Marin derives it (e.g. for an evaluation step's name).

    ``checkpoints/<run>/checkpoints/step-<n>`` (or ``.../<run>/hf/step-<n>``) -> ``<run>-<n>``; a Hugging
    Face id ``org/model`` -> ``model``; another path -> its last component; an ``InputName`` of a
    training step -> ``<step's last name part>-<n>`` for ``.../step-<n>`` inside it, else the last
    component (or the step's name). A Levanter checkpoints folder that does not end in a step is an error.
    """
    if isinstance(path, InputName):
        run = (path.step.name if path.step is not None else "").rsplit("/", 1)[-1]
        if not path.name:
            return run
        parts = [p for p in path.name.split("/") if p]
        if parts[-1].startswith("step-"):
            return f"{run}-{_step_number(parts[-1], path.name)}"
        if len(parts) >= 2 and parts[-2] == "checkpoints":
            raise ValueError(f"Invalid path: {path.name}")
        return parts[-1]
    if not isinstance(path, str):
        raise ValueError(f"Unknown type for path: {path}")
    if _HUB_ID.match(path):
        return path.split("/")[-1]
    path = path.rstrip("/")
    parts = path.split("/")
    if _LEVANTER_RUN.search(path) and not parts[-1].startswith("step-"):
        raise ValueError(f"Invalid path: {path}")
    if not parts[-1].startswith("step-"):
        return parts[-1]
    return f"{parts[-3]}-{_step_number(parts[-1], path)}"
