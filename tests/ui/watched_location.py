"""A code location for ``tests/ui/test_watched_steps.py`` (served as ``marin``).

* ``team``: issue 36's reproduction, ``prep`` (``versioned(N)``, N read from the file named by
  ``$MARIN_TEST_PREP_VERSION_FILE``: the test edits it, then reloads) -> ``features`` -> ``train``
  (watched: an op of its own) -> ``evaluate``;
* ``long``: ``long/train``, a training-like watched step that runs as a Ray task and beats (writes
  its pid, then touches a file) until it is stopped -- what terminating its run must cancel.
"""

from __future__ import annotations

import os
from pathlib import Path

from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from marin_resources.accelerators import CpuConfig
from tests.dagster_bridge.run_steps import BeatConfig, beat, research_chain

PREP_VERSION = int(Path(os.environ["MARIN_TEST_PREP_VERSION_FILE"]).read_text().strip())
TRAIN_SECONDS = float(os.environ.get("MARIN_TEST_TRAIN_SECONDS", "3"))


chain = research_chain(PREP_VERSION, train_seconds=TRAIN_SECONDS, train_watched=True)
long_train = ExecutorStep(
    "long/train",
    beat,
    BeatConfig(this_output_path(), os.environ.get("MARIN_TEST_BEAT_DIR", "/tmp/marin-beat"), versioned(600.0)),
    resources=CpuConfig(num_cpus=1),  # a Ray task, as training is
    watched=True,
)

defs = build_definitions(
    [
        Experiment(name="team", steps=list(chain.values())),
        Experiment(name="long", steps=[long_train], heartbeat_s=1.0, stale_s=30.0),
    ]
)
