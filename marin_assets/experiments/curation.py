"""Data curation of the sample HTML source, partitioned by data drop.

``python -m marin_assets.experiments.curation [--prefix DIR] [--sample_drops 3]`` writes the
sample drops into the landing zone when they are missing (the "download" of this source), then
runs every stage for every complete drop. In Dagster, the landing sensor does the same drop by
drop.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from marin_assets.execution import ExecutorStep, executor_main
from marin_assets.execution.declarations import Experiment, StepCheck
from marin_assets.experiments.curation_pipeline import (
    check_classifier_accuracy,
    check_ids_unique,
    check_no_empty_text,
    check_planted_duplicates_removed,
    curation_steps,
    default_partition_set,
)
from marin_assets.experiments.sample_data import DEFAULT_SOURCE, SampleConfig, ground_truth_path, write_drop
from marin_assets.landing.zone import LandingDrops
from marin_resources.storage import default_prefix

SOURCE = DEFAULT_SOURCE
# A landing path relative to the prefix keeps the versions identical on any bucket or folder.
LANDING = LandingDrops(f"landing/{SOURCE}")
PARTITION_SET = default_partition_set(LANDING.landing_dir)  # "sample-html": named after the source
CLASSIFIER_ACCURACY_FLOOR = 0.8


def discover_drops(prefix: str) -> list[str]:
    """Complete, valid drops of the sample source, checksums verified (the command line's partition keys).

    A drop its checksums reject is not a partition, so it never enters the dedup chain. Dagster
    does not call this: its partition keys are the drops the landing sensor verified.
    """
    return LANDING(prefix)


def build_steps(use_ray: bool = True) -> dict[str, ExecutorStep]:
    """The curation steps of the sample source, keyed by role."""
    return curation_steps(LANDING.landing_dir, use_ray=use_ray)


def build_checks(steps: dict[str, ExecutorStep]) -> list[StepCheck]:
    """Asset checks: unique ids, no empty text, planted duplicates gone, classifier accuracy."""
    consolidated = steps["consolidated"]
    return [
        StepCheck(
            consolidated, "ids_unique", lambda out, _p, _prefix: check_ids_unique(out), "Every document id occurs once"
        ),
        StepCheck(
            consolidated,
            "no_empty_text",
            lambda out, _p, _prefix: check_no_empty_text(out),
            "No document has empty text",
        ),
        StepCheck(
            consolidated,
            "planted_duplicates_removed",
            lambda out, p, prefix: check_planted_duplicates_removed(
                out, ground_truth_path(prefix, SOURCE, p) if p else None
            ),
            "Sample data: every planted exact/near/paragraph duplicate is gone",
        ),
        StepCheck(
            steps["quality_model"],
            "classifier_accuracy",
            lambda out, _p, _prefix: check_classifier_accuracy(out, CLASSIFIER_ACCURACY_FLOOR),
            f"Held-out accuracy of the quality classifier >= {CLASSIFIER_ACCURACY_FLOOR}",
        ),
    ]


STEPS = build_steps()
# The source the raw step declares, named here for the scripts building on this one.
PARTITIONS = {PARTITION_SET: LANDING}
# What the code location shows (group "curation"); the landing sensor and the drop job follow from
# the declared landing zone.
EXPERIMENT = Experiment(
    steps=list(STEPS.values()),
    description="Sample HTML drops: raw -> text -> quality -> dedup -> consolidated",
    partitions=PARTITIONS,
    checks=build_checks(STEPS),
)


def ensure_sample_drops(prefix: str, count: int, docs_per_drop: int | None = None) -> list[str]:
    """Write sample drops ``drop-001..drop-<count>`` that are not in the landing zone yet."""
    present = set(discover_drops(prefix))
    config = SampleConfig() if docs_per_drop is None else SampleConfig(docs_per_drop=docs_per_drop)
    written = []
    for i in range(1, count + 1):
        drop_id = f"drop-{i:03d}"
        if drop_id not in present:
            write_drop(prefix, drop_id, config, SOURCE)
            written.append(drop_id)
    return written


def split_sample_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Parse ``--sample_drops`` / ``--sample_docs``; the rest goes to ``executor_main``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--sample_drops", type=int, default=3, help="sample drops to make sure exist (0: none)")
    parser.add_argument("--sample_docs", type=int, default=None, help="documents per sample drop")
    parser.add_argument("--prefix", default=None)
    known, rest = parser.parse_known_args(argv)
    if known.prefix:
        rest = ["--prefix", known.prefix, *rest]
    return known, rest


def main(argv: Sequence[str] | None = None) -> None:
    """Make sure the sample drops exist, then run the curation steps for every drop."""
    known, rest = split_sample_args(list(sys.argv[1:] if argv is None else argv))
    prefix = known.prefix or default_prefix()
    if known.sample_drops and "--dry_run" not in rest:
        ensure_sample_drops(prefix, known.sample_drops, known.sample_docs)
    executor_main(
        list(STEPS.values()), description="Curation of the sample HTML source", argv=rest, partitions=PARTITIONS
    )


if __name__ == "__main__":
    main()
