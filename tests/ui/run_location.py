"""A code location for the run-scheduling UI tests: independent sleeping steps and a failing family.

Served by ``tests/ui/test_ui_runs.py`` under the location name ``marin``. ``$MARIN_TEST_FAIL_FLAG``
names a file: ``family/bad`` fails while it exists (the test removes it before re-executing).
"""

from __future__ import annotations

import os

from marin_assets.definitions import build_definitions
from marin_assets.execution.declarations import Experiment
from tests.dagster_bridge.run_steps import failing_family, independent_steps

NAP_SECONDS = float(os.environ.get("MARIN_TEST_NAP_SECONDS", "6"))

defs = build_definitions(
    [
        Experiment(name="naps", steps=independent_steps(4, NAP_SECONDS)),
        Experiment(
            name="family", steps=list(failing_family(os.environ.get("MARIN_TEST_FAIL_FLAG", ""), NAP_SECONDS).values())
        ),
    ]
)
