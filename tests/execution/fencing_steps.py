"""Experiments for the fencing / takeover tests (importable from subprocesses; any prefix, gs:// too).

* ``chain``: six steps; each appends numbered lines to ``parts.txt`` one by one (read, append,
  write back), so a second writer on the same output shows up as a different file content.
* ``gen``: a step that writes ``$GEN_FILES`` files in ``$GEN_CHUNKS`` chunks each with plain fsspec
  (``with fsspec.open(path, "wb")``, no engine helper), every line tagged with ``$RUNNER_NAME``;
  and ``use``, a downstream step that copies what it read (the paused-holder probe).
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


@dataclass(frozen=True)
class GenConfig:
    output_path: str
    lines_per_chunk: int = 50


def gen_files(config: GenConfig) -> dict[str, str]:
    """Write tagged lines chunk by chunk (an event per chunk, so a test can pause the writer there)."""
    import fsspec

    runner = os.environ.get("RUNNER_NAME", "?")
    files, chunks = int(os.environ.get("GEN_FILES", "4")), int(os.environ.get("GEN_CHUNKS", "4"))
    delay = float(os.environ.get("CHUNK_DELAY_S", "0.05"))
    for f in range(files):
        with fsspec.open(join_path(config.output_path, f"file{f}.txt"), "wb") as handle:
            for c in range(chunks):
                lines = "".join(f"{runner} file{f} chunk{c} line{k}\n" for k in range(config.lines_per_chunk))
                handle.write(lines.encode())
                handle.flush()
                _mark(f"gen {runner} {f} {c}")
                time.sleep(delay)
    return {"written_by": runner, "first_file": join_path(config.output_path, "file0.txt")}


@dataclass(frozen=True)
class UseConfig:
    output_path: str
    input_path: str


def use_files(config: UseConfig) -> dict[str, int]:
    """Copy every line ``gen`` published (what a downstream step consumes)."""
    import fsspec

    files = int(os.environ.get("GEN_FILES", "4"))
    lines = []
    for f in range(files):
        with fsspec.open(join_path(config.input_path, f"file{f}.txt"), "rb") as handle:
            lines.append(handle.read())
    atomic_write_text(join_path(config.output_path, "consumed.txt"), b"".join(lines).decode())
    return {"lines": sum(chunk.count(b"\n") for chunk in lines)}


def gen() -> list[ExecutorStep]:
    g = ExecutorStep("probe/gen", gen_files, GenConfig(this_output_path(), versioned(50)))
    return [g, ExecutorStep("probe/use", use_files, UseConfig(this_output_path(), output_path_of(g)))]


EXPERIMENTS = {"chain": chain, "train": train, "gen": gen}

if __name__ == "__main__":
    which, argv = sys.argv[1], sys.argv[2:]
    executor_main(EXPERIMENTS[which](), argv=argv)


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
