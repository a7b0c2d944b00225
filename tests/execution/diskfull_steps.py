"""A step that writes ``FILL_MB`` MiB into its output, for the disk-full tests (run as a subprocess).

``python -m tests.execution.diskfull_steps <executor_main args...>``
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from marin_assets.execution import ExecutorStep, executor_main, this_output_path, versioned


@dataclass(frozen=True)
class FillConfig:
    output_path: str
    mb: int = versioned(8)


def fill(config: FillConfig) -> dict[str, int]:
    """Write ``mb`` MiB of ``x`` into ``data.bin`` (plain file writes, flushed every MiB)."""
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "data.bin"), "wb") as handle:
        for _ in range(config.mb):
            handle.write(b"x" * (1 << 20))
            handle.flush()
    return {"mb": config.mb}


def steps() -> list[ExecutorStep]:
    return [ExecutorStep("fill", fill, FillConfig(this_output_path(), versioned(int(os.environ.get("FILL_MB", "8")))))]


if __name__ == "__main__":
    executor_main(steps(), argv=sys.argv[1:])
