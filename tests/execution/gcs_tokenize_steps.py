"""Curation of the sample drops plus the quickstart tokenizer and per-drop caches -- no training.

``python -m tests.execution.gcs_tokenize_steps --prefix P [executor_main args...]`` writes two small
sample drops when missing, then runs the steps through ``executor_main`` (its JSON summary is the
last line printed).
"""

from __future__ import annotations

import sys

from marin_assets.execution import executor_main
from marin_assets.experiments import curation, quickstart


def tokenize_steps() -> dict:
    """The quickstart's steps by role (test size); this experiment runs up to ``tokenized``."""
    return quickstart.build_steps("test")


if __name__ == "__main__":
    argv = sys.argv[1:]
    prefix = argv[argv.index("--prefix") + 1]
    curation.ensure_sample_drops(prefix, 2, docs_per_drop=30)
    steps = tokenize_steps()
    executor_main(
        [steps["tokenized"], *curation.STEPS.values()],
        argv=[*argv, "--max_concurrent", "2"],
        partitions=curation.PARTITIONS,
    )
