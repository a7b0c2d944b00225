"""Entry point of the train and eval subprocesses: Levanter's config is built there, not in the engine.

Building a Levanter config means importing Levanter, JAX and transformers -- about 8 CPU-seconds,
as much as the subprocess that runs Levanter pays anyway. Built in that subprocess, the engine
process (the command line's, or a Dagster run's) never imports them::

    python -m marin_assets.training.levanter_main train SPEC.pkl   # levanter.main.train_lm
    python -m marin_assets.training.levanter_main eval SPEC.pkl    # levanter.main.eval_lm

``SPEC.pkl`` (:func:`write_spec`) names a *prepare* function (``"module:function"``) and its payload;
the subprocess calls ``prepare(payload, local_yaml)``, which writes the exact YAML to run and returns
its path, then runs Levanter's own ``main`` on it, parsed as ``python -m levanter.main.<x>
--config_path`` would. The prepare functions are
:func:`marin_assets.training.levanter_config.prepare_training` and
:func:`marin_assets.evaluation.evaluate.prepare_levanter_eval`. This module imports nothing of the
project, so neither training nor evaluation depends on the other through it.
"""

from __future__ import annotations

import importlib
import os
import pickle
import sys
from collections.abc import Sequence
from typing import Any

LEVANTER_MAINS = {"train": "levanter.main.train_lm", "eval": "levanter.main.eval_lm"}


def write_spec(path: str, prepare: str, payload: Any) -> str:
    """Pickle ``(prepare, payload)`` to ``path`` for the subprocess; returns ``path``."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump((prepare, payload), handle)
    return path


def command(kind: str, spec_path: str) -> list[str]:
    """The subprocess command line for ``kind`` (``train`` or ``eval``)."""
    return [sys.executable, "-m", "marin_assets.training.levanter_main", kind, spec_path]


def local_yaml_path(spec_path: str) -> str:
    """The local YAML the subprocess writes next to its spec."""
    return os.path.splitext(spec_path)[0] + ".yaml"


def plan_path(spec_path: str) -> str:
    """Where ``train`` writes the run's shape (read back by the step for its summary)."""
    return os.path.splitext(spec_path)[0] + ".plan.json"


def main(argv: Sequence[str] | None = None) -> None:
    """Prepare the config named by ``argv`` (``KIND SPEC.pkl``) and run Levanter on it."""
    kind, spec_path = list(sys.argv[1:] if argv is None else argv)
    if kind not in LEVANTER_MAINS:
        raise SystemExit(f"unknown kind {kind!r}: expected one of {sorted(LEVANTER_MAINS)}")
    with open(spec_path, "rb") as handle:
        prepare_ref, payload = pickle.load(handle)
    module, _, name = prepare_ref.partition(":")
    prepare = getattr(importlib.import_module(module), name)
    yaml_path = prepare(payload, local_yaml_path(spec_path))
    import levanter.config

    levanter_main = importlib.import_module(LEVANTER_MAINS[kind])
    levanter.config.main(levanter_main.main, args=["--config_path", yaml_path])()


if __name__ == "__main__":
    main()
