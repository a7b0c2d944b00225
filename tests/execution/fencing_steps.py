"""Experiments for the fencing / takeover tests (importable from subprocesses; any prefix, gs:// too).

* ``chain``: six steps; each appends numbered lines to ``parts.txt`` one by one (read, append,
  write back), so a second writer on the same output shows up as a different file content.
* ``train``: one step that runs a stand-in "trainer" subprocess through the models' subprocess
  runner and waits for it (``$FAKE_TRAIN_S`` seconds; it writes its pid to ``$MARKER_DIR``).

``python -m tests.execution.fencing_steps chain|train <executor_main args...>``
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

from marin_assets.execution import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text, join_path, read_text


def _mark(line: str) -> None:
    marker_dir = os.environ.get("MARKER_DIR")
    if marker_dir:
        os.makedirs(marker_dir, exist_ok=True)
        with open(os.path.join(marker_dir, "events.log"), "a") as handle:
            handle.write(f"{line} {os.getpid()}\n")


@dataclass(frozen=True)
class AppendConfig:
    output_path: str
    input_path: str | None
    name: str
    parts: int = 5


def append_parts(config: AppendConfig) -> dict[str, int]:
    """Append ``parts`` lines derived from the input's last line, one write per line."""
    base = "root"
    if config.input_path:
        previous = (read_text(join_path(config.input_path, "parts.txt")) or "").splitlines()
        base = previous[-1] if previous else "?"
    path = join_path(config.output_path, "parts.txt")
    delay = float(os.environ.get("PART_DELAY_S", "0.2"))
    _mark(f"start {config.name}")
    for i in range(config.parts):
        current = (read_text(path) or "") if i else ""
        atomic_write_text(path, current + f"{config.name}.{i}<{base}>\n")
        _mark(f"wrote {config.name} {i}")
        time.sleep(delay)
    return {"parts": config.parts}


def chain(length: int = 6) -> list[ExecutorStep]:
    steps: list[ExecutorStep] = []
    for i in range(length):
        steps.append(
            ExecutorStep(
                f"fence/chain{i}",
                append_parts,
                AppendConfig(
                    this_output_path(),
                    output_path_of(steps[-1]) if steps else None,
                    name=f"chain{i}",
                    parts=versioned(5),
                ),
            )
        )
    return steps


@dataclass(frozen=True)
class FakeTrainConfig:
    output_path: str
    steps: int = 10


def fake_train(config: FakeTrainConfig) -> dict[str, float]:
    """Run a stand-in trainer subprocess (sleeps ``$FAKE_TRAIN_S``) the way train/eval steps do."""
    from marin_assets.training import subprocess_runner

    seconds = float(os.environ.get("FAKE_TRAIN_S", "600"))
    marker_dir = os.environ.get("MARKER_DIR", "/tmp")
    code = (
        "import os, sys, time; "
        f"open(os.path.join({marker_dir!r}, f'trainer-{{os.getpid()}}'), 'w').close(); "
        f"time.sleep({seconds})"
    )
    _mark("start train")
    log = os.path.join(marker_dir, f"train-{os.getpid()}.log")
    subprocess_runner.run([sys.executable, "-c", code], log, dict(os.environ), timeout_s=None)
    atomic_write_text(join_path(config.output_path, "done.txt"), "trained\n")
    return {"seconds": seconds}


def train() -> list[ExecutorStep]:
    return [ExecutorStep("fence/train", fake_train, FakeTrainConfig(this_output_path(), versioned(10)))]


if __name__ == "__main__":
    which, argv = sys.argv[1], sys.argv[2:]
    executor_main(chain() if which == "chain" else train(), argv=argv)


@dataclass(frozen=True)
class LoopConfig:
    output_path: str
    marker_dir: str
    seconds: float = 600


def tick_loop(config: LoopConfig) -> dict[str, int]:
    """Runs as a Ray task: append a tick line every 0.1 s until ``seconds`` pass."""
    os.makedirs(config.marker_dir, exist_ok=True)
    deadline = time.monotonic() + config.seconds
    ticks = 0
    while time.monotonic() < deadline:
        with open(os.path.join(config.marker_dir, "ticks.log"), "a") as handle:
            handle.write(f"tick {os.getpid()}\n")
        ticks += 1
        time.sleep(0.1)
    return {"ticks": ticks}


def ray_loop(marker_dir: str) -> list[ExecutorStep]:
    from marin_resources.accelerators import CpuConfig

    return [
        ExecutorStep(
            "fence/ray_loop",
            tick_loop,
            LoopConfig(this_output_path(), marker_dir, versioned(600)),
            resources=CpuConfig(num_cpus=1),
        )
    ]
