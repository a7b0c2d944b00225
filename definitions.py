"""Entry point of the marin-dagster code location (``workspace.yaml`` points here).

The experiment scripts come from ``[tool.marin] experiments`` of the project's ``pyproject.toml``
(this folder's, unless the working directory has its own) or ``$MARIN_EXPERIMENTS``.
"""

import gc
import os

from marin_assets.definitions import build_definitions
from marin_assets.execution import discovery

discovery.FALLBACK_ROOT = os.path.dirname(os.path.abspath(__file__))

# A large location allocates objects that live as long as the process (~640,000 tracked ones at
# 10,000 steps), and Python's generational collector rescans them again and again while they are
# being built: at 10,000 steps that was a third of the load (bench/location_load). So the collector
# is paused while the definitions and their repository (built here once, cached, validated early)
# are made, and the result is frozen: later collections (snapshots, sensor ticks) skip it. A paused
# build leaves a few hundred unreachable objects (measured), which the freeze keeps: a bounded,
# one-time cost.
_collecting = gc.isenabled()
gc.disable()
try:
    defs = build_definitions()
    defs.get_repository_def()
finally:
    gc.freeze()
    if _collecting:
        gc.enable()
