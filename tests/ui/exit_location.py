"""A code location for ``tests/ui/test_dev_exit.py`` (served as ``marin``): two Ray-task steps.

* ``exit/quick``: beats for ~1 s on Ray, then finishes (a run that used Ray and is over);
* ``exit/long``: beats until stopped (a training-like run still in flight when ``dagster dev`` stops).
Both write their pid into ``$MARIN_TEST_BEAT_DIR/<name>/pid``.
"""

from __future__ import annotations

import os

from marin_assets.definitions import build_definitions
from marin_assets.execution import ExecutorStep, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from marin_resources.accelerators import CpuConfig
from tests.dagster_bridge.run_steps import BeatConfig, beat

BEAT_DIR = os.environ.get("MARIN_TEST_BEAT_DIR", "/tmp/marin-beat")

quick = ExecutorStep(
    "exit/quick",
    beat,
    BeatConfig(this_output_path(), os.path.join(BEAT_DIR, "quick"), versioned(1.0)),
    resources=CpuConfig(num_cpus=1),  # a Ray task
)
long = ExecutorStep(
    "exit/long",
    beat,
    BeatConfig(this_output_path(), os.path.join(BEAT_DIR, "long"), versioned(600.0)),
    resources=CpuConfig(num_cpus=1),
    watched=True,  # its own op, as training is
)

defs = build_definitions([Experiment(name="exit", steps=[quick, long], heartbeat_s=1.0, stale_s=30.0)])
