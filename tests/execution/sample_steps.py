"""Step functions and experiments used by the engine tests (importable from subprocesses)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field

from marin_assets.execution import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class WriteConfig:
    """Writes ``value`` into ``output_path/value.json``; counts calls in ``counter_dir``."""

    output_path: str
    value: int = 0
    note: str = "not versioned"
    counter_dir: str = ""
    sleep_s: float = 0.0
    fail: bool = False
    inputs: list = field(default_factory=list)


def record_call(counter_dir: str, name: str) -> None:
    """Append one line per call: how the tests count computations across processes."""
    if counter_dir:
        os.makedirs(counter_dir, exist_ok=True)
        with open(os.path.join(counter_dir, "calls.log"), "a") as handle:
            handle.write(f"{name} {os.getpid()}\n")


def write_value(config: WriteConfig) -> dict[str, int]:
    """The generic test step: sleep, maybe fail, sum the inputs' values and write a result."""
    record_call(config.counter_dir, os.path.basename(config.output_path.rstrip("/")))
    time.sleep(config.sleep_s)
    if config.fail:
        raise ValueError(f"planned failure for value {config.value}")
    total = config.value
    for path in config.inputs:
        with open(os.path.join(path, "value.json")) as handle:
            total += json.load(handle)["total"]
    atomic_write_text(os.path.join(config.output_path, "value.json"), json.dumps({"total": total}))
    return {"total": total}


@dataclass(frozen=True)
class SlowWriteConfig:
    """Writes ``chunks`` parts slowly, so a test can kill the process mid-write."""

    output_path: str
    chunks: int = 20
    delay_s: float = 0.1
    marker_dir: str = ""


def slow_write(config: SlowWriteConfig) -> dict[str, int]:
    """Write parts one by one (non-atomically, like a real long job), then a manifest."""
    os.makedirs(config.output_path, exist_ok=True)
    if config.marker_dir:
        os.makedirs(config.marker_dir, exist_ok=True)
        open(os.path.join(config.marker_dir, f"started-{os.getpid()}"), "w").close()
    for i in range(config.chunks):
        with open(os.path.join(config.output_path, f"part-{i:03d}.txt"), "w") as handle:
            handle.write(f"chunk {i}\n" * 100)
        time.sleep(config.delay_s)
    atomic_write_text(os.path.join(config.output_path, "manifest.json"), json.dumps({"parts": config.chunks}))
    return {"parts": config.chunks}


def diamond(counter_dir: str = "", sleep_s: float = 0.0, value: int = 1) -> list[ExecutorStep]:
    """a -> (b, c) -> d, the shape most tests use."""
    a = ExecutorStep(
        "test/a",
        write_value,
        WriteConfig(this_output_path(), versioned(value), counter_dir=counter_dir, sleep_s=sleep_s),
    )
    b = ExecutorStep(
        "test/b",
        write_value,
        WriteConfig(
            this_output_path(), versioned(10), counter_dir=counter_dir, sleep_s=sleep_s, inputs=[output_path_of(a)]
        ),
    )
    c = ExecutorStep(
        "test/c",
        write_value,
        WriteConfig(
            this_output_path(), versioned(100), counter_dir=counter_dir, sleep_s=sleep_s, inputs=[output_path_of(a)]
        ),
    )
    d = ExecutorStep(
        "test/d",
        write_value,
        WriteConfig(
            this_output_path(),
            versioned(1000),
            counter_dir=counter_dir,
            sleep_s=sleep_s,
            inputs=[output_path_of(b), output_path_of(c)],
        ),
    )
    return [d]


if __name__ == "__main__":
    # python -m tests.execution.sample_steps <experiment> <executor_main args...>
    which = sys.argv[1]
    argv = sys.argv[2:]
    if which == "diamond":
        executor_main(
            diamond(counter_dir=os.environ.get("COUNTER_DIR", ""), sleep_s=float(os.environ.get("SLEEP_S", "0"))),
            argv=argv,
        )
    elif which == "slow":
        step = ExecutorStep(
            "test/slow",
            slow_write,
            SlowWriteConfig(
                this_output_path(),
                chunks=int(os.environ.get("CHUNKS", "20")),
                marker_dir=os.environ.get("MARKER_DIR", ""),
            ),
        )
        executor_main([step], argv=argv)
    else:
        raise SystemExit(f"unknown experiment {which}")
