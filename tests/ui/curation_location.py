"""The curation experiment as a code location with its stages in process (no Ray).

The same assets, sensor and jobs as ``definitions.py`` builds for curation; only the per-drop
steps run in the run's own process instead of as Ray tasks, so a UI test on a 2-core machine
finishes in minutes. Served by ``tests/ui/test_drops_ui.py`` under the location name ``marin``.
"""

from __future__ import annotations

from marin_assets.definitions import build_definitions
from marin_assets.execution.declarations import Experiment
from marin_assets.experiments import curation

_steps = curation.build_steps(use_ray=False)

defs = build_definitions(
    [
        Experiment(
            name="curation",
            steps=list(_steps.values()),
            description="Sample HTML drops, stages in process",
            partitions=curation.PARTITIONS,
            checks=curation.build_checks(_steps),
        )
    ]
)
