"""Steps for the run-scheduling tests: ones that sleep and record when they ran, and one that fails.

Importable by a code location (``tests/ui/run_location.py``) and by in-process tests alike.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text, join_path, read_bytes


@dataclass(frozen=True)
class NapConfig:
    output_path: str
    seconds: float
    tag: str
    inputs: Any = field(default_factory=list)
    fail_while: str = ""  # the step fails while this file exists


def nap(config: NapConfig) -> dict[str, Any]:
    """Sleep, then write when it started and ended (``interval.json``)."""
    start = time.time()
    if config.fail_while and os.path.exists(config.fail_while):
        raise ValueError(f"planned failure of {config.tag}")
    time.sleep(config.seconds)
    interval = {"start": start, "end": time.time(), "pid": os.getpid()}
    atomic_write_text(join_path(config.output_path, "interval.json"), json.dumps(interval))
    return {"slept": config.seconds}


def interval_of(output_path: str) -> tuple[float, float]:
    """When the step ran (its own ``interval.json``), on any filesystem (``gs://`` on the topology)."""
    data = read_bytes(join_path(output_path, "interval.json"))
    assert data is not None, f"{output_path}: no interval.json"
    interval = json.loads(data)
    return interval["start"], interval["end"]


def independent_steps(count: int, seconds: float, name: str = "nap") -> list[ExecutorStep]:
    """``count`` steps with no input between them."""
    return [
        ExecutorStep(f"{name}/s{i:02d}", nap, NapConfig(this_output_path(), versioned(seconds), versioned(f"s{i}")))
        for i in range(count)
    ]


def failing_family(flag: str, seconds: float = 1.0, name: str = "family") -> dict[str, ExecutorStep]:
    """``bad`` fails while ``flag`` exists; ``child`` and ``grandchild`` follow it; ``sibling``
    (slower than ``bad``) and ``root`` do not depend on it."""
    root = ExecutorStep(f"{name}/root", nap, NapConfig(this_output_path(), versioned(0.1), "root"))
    bad = ExecutorStep(
        f"{name}/bad",
        nap,
        NapConfig(this_output_path(), versioned(0.1), "bad", [output_path_of(root)], fail_while=flag),
    )
    sibling = ExecutorStep(
        f"{name}/sibling", nap, NapConfig(this_output_path(), versioned(seconds), "sibling", [output_path_of(root)])
    )
    child = ExecutorStep(
        f"{name}/child", nap, NapConfig(this_output_path(), versioned(0.1), "child", [output_path_of(bad)])
    )
    grandchild = ExecutorStep(
        f"{name}/grandchild",
        nap,
        NapConfig(this_output_path(), versioned(0.1), "grandchild", [output_path_of(child), output_path_of(sibling)]),
    )
    return {"root": root, "bad": bad, "sibling": sibling, "child": child, "grandchild": grandchild}


# What the engine records for each of ``failing_family``'s steps after a run in which ``bad`` failed.
FAMILY_STATUS_AFTER_BAD_FAILED = {
    "root": "SUCCESS",
    "sibling": "SUCCESS",
    "bad": "FAILED",
    "child": "DEP_FAILED",
    "grandchild": "DEP_FAILED",
}


def talk(config: NapConfig) -> dict[str, Any]:
    """Report a progress line (as training does), then nap."""
    from marin_resources.progress import report_progress

    report_progress(f"train: step 1: loss 2.0 ({config.tag})")
    return nap(config)


def research_chain(
    prep_version: int, train_seconds: float = 0.1, name: str = "team", train_watched: bool | None = None
) -> dict[str, ExecutorStep]:
    """The issue-36 reproduction: ``prep`` (``versioned(prep_version)``) -> ``features`` -> ``train``
    -> ``evaluate``; ``train`` naps ``train_seconds`` (``train_watched``: its ``watched``)."""
    prep = ExecutorStep(f"{name}/prep", nap, NapConfig(this_output_path(), 0.1, "prep", [versioned(prep_version)]))
    features = ExecutorStep(
        f"{name}/features", nap, NapConfig(this_output_path(), 0.1, "features", [output_path_of(prep)])
    )
    train = ExecutorStep(
        f"{name}/train",
        nap,
        NapConfig(this_output_path(), train_seconds, "train", [output_path_of(features)]),
        watched=train_watched,
    )
    evaluate = ExecutorStep(
        f"{name}/evaluate", nap, NapConfig(this_output_path(), 0.1, "evaluate", [output_path_of(train)])
    )
    return {"prep": prep, "features": features, "train": train, "evaluate": evaluate}


@dataclass(frozen=True)
class BeatConfig:
    output_path: str
    beat_dir: str
    seconds: float


def beat(config: BeatConfig) -> dict:
    """A training-like step (run it on Ray): write its pid, then touch ``beat`` every 0.2 s for ``seconds``."""
    folder = Path(config.beat_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + config.seconds
    while time.monotonic() < deadline:
        (folder / "beat").write_text(str(time.time()))
        time.sleep(0.2)
    return {"beat_s": config.seconds}
