"""The quickstart: raw HTML drops -> curated documents -> tokenizer -> Levanter cache -> tiny model -> eval.

``python -m marin_assets.experiments.quickstart [--size tiny|test] [--sample_drops 3] [--prefix DIR] [-v]
[--stop_ray]`` writes the sample drops into the landing zone when missing, then runs every step on
embedded defaults (local folder, local Ray, CPU). A second run recomputes nothing. ``--stop_ray``
(``scripts/quickstart.sh`` passes it) stops the embedded Ray head at the end.

Steps:

* curation (``marin_assets.experiments.curation``), partitioned by drop;
* ``tokenizers/quickstart-<size>``: byte-level BPE trained on the cleaned documents of the
  reference drop (one fixed partition, so new drops do not change the tokenizer and re-tokenize
  everything);
* ``tokenized/quickstart-<size>``: one Levanter cache per drop (a new drop tokenizes only itself);
* ``tokenized/quickstart-<size>-heldout``: the validation set -- the validation split of the
  stdlib-docstring documents (same domain as the sample pages, which are built from stdlib
  docstring sentences, so not guaranteed disjoint from the training text);
* ``checkpoints/quickstart-<size>``: Levanter training on the mixture of every drop's cache;
* ``evaluation/quickstart-<size>``: Levanter bits-per-byte on the held-out cache and the shipped
  lm-eval tasks on the HF export.

A new drop therefore runs only its own units (curation and its cache) plus training and
evaluation, which read every drop; the classifier (its own labelled set) and the tokenizer (the
reference drop) keep their versions (``tests/curation/test_incremental_contract.py``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence

from marin_assets.execution import ExecutorStep, executor_main, output_path_of
from marin_assets.execution.declarations import Experiment, StepSchedule
from marin_assets.execution.observers import register_run_observer, unregister_run_observer
from marin_assets.experiments import curation
from marin_assets.experiments.quickstart_output import configure_output, summary
from marin_assets.experiments.quickstart_steps import SIZES, quickstart_model_steps
from marin_assets.experiments.sample_documents import sample_documents_step
from marin_resources.storage import default_prefix

REFERENCE_DROP = "drop-001"


def build_steps(size: str = "tiny", curation_steps: dict[str, ExecutorStep] | None = None) -> dict[str, ExecutorStep]:
    """The quickstart's model steps on top of the curation steps, keyed by role."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {sorted(SIZES)}")
    cur = curation_steps if curation_steps is not None else curation.STEPS
    cleaned = output_path_of(cur["consolidated"], "docs")
    heldout_docs = sample_documents_step(max_bytes=SIZES[size].sample_bytes)
    model = quickstart_model_steps(
        cleaned,
        size=size,
        tokenizer_documents=cleaned.at_partition(REFERENCE_DROP),
        heldout_documents=heldout_docs / "validation",
    )
    return {**cur, "heldout_documents": heldout_docs, **model}


# The size the code location shows: the README's tiny model, or the test size where minutes matter
# (the deployment test sets MARIN_QUICKSTART_SIZE=test for the code server it starts).
STEPS = build_steps(os.environ.get("MARIN_QUICKSTART_SIZE", "tiny"))
PARTITIONS = curation.PARTITIONS


def schedules(steps: dict[str, ExecutorStep]) -> list[StepSchedule]:
    """Nightly re-train and re-evaluate: cached unless new drops reached the training mixture."""
    return [
        StepSchedule(
            name="quickstart_retrain_nightly",
            cron="0 3 * * *",
            steps=[steps["train"], steps["evaluation"]],
            description="Re-train and re-evaluate the quickstart model on every drop so far",
        )
    ]


# What the code location shows (group "quickstart"): the evaluation and what it needs; the
# curation steps it shares are the curation group's assets.
EXPERIMENT = Experiment(
    steps=[STEPS["evaluation"]],
    description="Curated drops -> tokenizer -> Levanter caches -> tiny Llama -> evaluation",
    partitions=PARTITIONS,
    schedules=schedules(STEPS),
)


def start_ray_in_background() -> threading.Thread | None:
    """Start the embedded Ray head now, in a thread, so that its start overlaps writing the sample
    drops and planning the run; the first Ray step then finds it (a file lock serialises the start).

    None when ``$RAY_ADDRESS`` names a cluster to use instead. A failure here is left to that
    first step, which starts the head again and reports the error.
    """
    if os.environ.get("RAY_ADDRESS"):
        return None
    from marin_resources.ray_connect import get_default_config
    from marin_resources.ray_head import start_embedded_head

    def start() -> None:
        try:
            start_embedded_head(get_default_config())
        except Exception as exc:  # noqa: BLE001 -- the first Ray step retries and raises
            logging.getLogger(__name__).debug("early Ray start failed: %s", exc)

    thread = threading.Thread(target=start, name="marin-ray-head-start", daemon=True)
    thread.start()
    return thread


class RayStopper:
    """Stops the embedded Ray head in a thread once the steps are done, while the run is recorded.

    Registered as the first run observer of ``executor_main`` (``register_run_observer(first=True)``), so it is
    called right after the last unit; the Dagster recording that follows computes nothing and needs
    no Ray. Some of Ray's daemons take seconds to exit on SIGTERM, time the recording now hides.
    """

    def __init__(self) -> None:
        self.thread: threading.Thread | None = None
        self.starting: threading.Thread | None = None  # the early start, if any: stopped after it

    def _stop(self) -> None:
        from marin_resources.ray_head import stop_embedded_head

        if self.starting is not None:
            self.starting.join()
        stop_embedded_head()

    def __call__(self, **_: object) -> None:
        if self.thread is None:
            from marin_resources.ray_head import disconnect_driver

            # Here, in the thread that ran the steps, not in the stopping thread: Ray ends the
            # process (status 1, no word) when one thread calls into it while another shuts it down.
            disconnect_driver()
            self.thread = threading.Thread(target=self._stop, name="marin-ray-stop", daemon=True)
            self.thread.start()

    def finish(self) -> None:
        """Wait for the stop (or stop now when the run ended before the observers were called)."""
        if self.thread is None:
            self(graph=None)
        assert self.thread is not None
        self.thread.join()


RAY_STOPPER = RayStopper()
RAY_STOPPER_NAME = "quickstart.ray_stopper"


def main(argv: Sequence[str] | None = None) -> None:
    """Make sure the sample drops exist, then run the whole quickstart."""
    start = time.monotonic()
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--size", default="tiny", choices=sorted(SIZES))
    parser.add_argument("-v", "--verbose", action="store_true", help="every log line (engine, Dagster, Ray)")
    parser.add_argument(
        "--stop_ray", action="store_true", help="stop the embedded Ray head at the end (scripts/quickstart.sh)"
    )
    known, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    configure_output(known.verbose)
    sample, rest = curation.split_sample_args(rest)
    prefix = sample.prefix or default_prefix()
    dry_run = "--dry_run" in rest
    stop_ray = known.stop_ray and not dry_run and not os.environ.get("RAY_ADDRESS")
    if stop_ray:
        register_run_observer(RAY_STOPPER_NAME, RAY_STOPPER, first=True)
    try:
        if sample.sample_drops and not dry_run:
            present = set(curation.discover_drops(prefix))
            if any(f"drop-{i:03d}" not in present for i in range(1, sample.sample_drops + 1)):
                # A fresh prefix: everything will run, curation on Ray. (A re-run, mostly cached,
                # starts Ray only if a step needs it.)
                RAY_STOPPER.starting = start_ray_in_background()
            curation.ensure_sample_drops(prefix, sample.sample_drops, sample.sample_docs)
        steps = build_steps(known.size)
        if not any(arg.startswith("--max_concurrent") for arg in rest):
            # One unit at a time: the stages use every core through Ray, JAX or their process pools,
            # and two curation units at once on Ray cost a second set of Ray worker processes (each
            # imports the stage libraries: ~4 CPU-seconds) -- measured slower on 2 cores, more memory.
            rest = [*rest, "--max_concurrent", "1"]
        report = executor_main(
            [steps["evaluation"], *curation.STEPS.values()],
            description=f"Quickstart ({known.size}): HTML drops to an evaluated model",
            argv=rest,
            partitions=PARTITIONS,
        )
    finally:
        if stop_ray:
            unregister_run_observer(RAY_STOPPER_NAME)
            RAY_STOPPER.finish()
    if report is not None:  # None: --dry_run
        print(summary(report, steps, prefix, os.environ.get("DAGSTER_HOME"), time.monotonic() - start))


if __name__ == "__main__":
    main()
