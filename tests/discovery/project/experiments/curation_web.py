"""Curation of the ``web`` landing zone, partitioned by drop; no partition source given (the landing zone's drops)."""

from __future__ import annotations

from marin_assets.execution import executor_main
from marin_assets.experiments.curation_pipeline import curation_steps

STEPS = curation_steps("landing/web", name_prefix="webcur", use_ray=False)

if __name__ == "__main__":
    executor_main(steps=[STEPS["consolidated"]], description="Curation of landing/web")
