"""Entry point of the marin-dagster code location (``workspace.yaml`` points here).

The experiment scripts come from ``[tool.marin] experiments`` of the project's ``pyproject.toml``
(this folder's, unless the working directory has its own) or ``$MARIN_EXPERIMENTS``.
"""

import os

from marin_assets.definitions import build_definitions
from marin_assets.execution import experiment

experiment.FALLBACK_ROOT = os.path.dirname(os.path.abspath(__file__))
defs = build_definitions()
