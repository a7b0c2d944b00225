"""Entry point of the train and eval subprocesses: Levanter's config is built there, not in the engine.

Building a Levanter config means importing Levanter, JAX and transformers -- about 8 CPU-seconds,
as much as the subprocess that runs Levanter pays anyway. Built in that subprocess, the engine
process (the command line's, or a Dagster run's) never imports them::

    python -m marin_assets.training.levanter_main train SPEC.pkl
    python -m marin_assets.training.levanter_main eval SPEC.pkl

``SPEC.pkl`` is written by the step in the engine (same code, same virtualenv): for ``train`` a
:class:`~marin_assets.training.training.TrainLmOnPodConfig` (resolved), for ``eval``
``(EvaluationConfig, hf_dir, work)``. ``train`` also writes ``SPEC.plan.json`` (steps, batch size, context
length) for the step's summary.
Each writes the exact YAML it runs (``<out>/train_config.yaml``, ``<work>/levanter_eval.yaml``) and
then runs Levanter's own ``main`` on it, parsed as ``python -m levanter.main.<x> --config_path`` would.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Sequence


def write_spec(path: str, spec: object) -> str:
    """Pickle ``spec`` to ``path`` for the subprocess; returns ``path``."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as handle:
        pickle.dump(spec, handle)
    return path


def command(kind: str, spec_path: str) -> list[str]:
    """The subprocess command line for ``kind`` (``train`` or ``eval``)."""
    return [sys.executable, "-m", "marin_assets.training.levanter_main", kind, spec_path]


def plan_path(spec_path: str) -> str:
    """Where ``train`` writes the run's shape (read back by the step for its summary)."""
    return os.path.splitext(spec_path)[0] + ".plan.json"


def prepare_training(config, local_yaml: str) -> str:
    """Levanter's training config for ``config`` (built once, here): reference checkpoint,
    ``<out>/train_config.yaml``, the local YAML Levanter parses; returns the local YAML's path."""
    import json

    from marin_assets.execution.storage import atomic_write_text, join_path
    from marin_assets.training.levanter_config import (
        build_levanter_config,
        levanter_config_yaml,
        reference_checkpoint_dir,
        write_reference_checkpoint,
    )

    lev_config = build_levanter_config(config)
    reference = reference_checkpoint_dir(str(config.output_path), lev_config.trainer.id)
    write_reference_checkpoint(reference, lev_config.model, lev_config.data.tokenizer)
    yaml_text = levanter_config_yaml(lev_config)
    atomic_write_text(join_path(config.output_path, "train_config.yaml"), yaml_text)
    with open(local_yaml, "w") as handle:
        handle.write(yaml_text)
    trainer = lev_config.trainer
    plan = {"num_train_steps": trainer.num_train_steps, "seq_len": lev_config.model.seq_len}
    plan["train_batch_size"] = trainer.train_batch_size if isinstance(trainer.train_batch_size, int) else 0
    with open(os.path.splitext(local_yaml)[0] + ".plan.json", "w") as handle:
        json.dump(plan, handle)
    return local_yaml


def main(argv: Sequence[str] | None = None) -> None:
    """Build the config named by ``argv`` (``KIND SPEC.pkl``) and run Levanter on it."""
    kind, spec_path = list(sys.argv[1:] if argv is None else argv)
    with open(spec_path, "rb") as handle:
        spec = pickle.load(handle)
    import levanter.config

    if kind == "train":
        from levanter.main import train_lm

        yaml_path = prepare_training(spec, os.path.splitext(spec_path)[0] + ".yaml")
        levanter.config.main(train_lm.main, args=["--config_path", yaml_path])()
    elif kind == "eval":
        from levanter.main import eval_lm

        from marin_assets.evaluation.evaluate import write_levanter_eval_config

        config, hf_dir, work = spec
        yaml_path = write_levanter_eval_config(config, hf_dir, work)
        levanter.config.main(eval_lm.main, args=["--config_path", yaml_path])()
    else:
        raise SystemExit(f"unknown kind {kind!r}: expected train or eval")


if __name__ == "__main__":
    main()
