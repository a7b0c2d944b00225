"""A partitioned step that reads no landing zone (for the "say what to pass" case)."""

from __future__ import annotations

from dataclasses import dataclass

from marin_assets.execution.storage import atomic_write_text


@dataclass(frozen=True)
class PartConfig:
    """Where the part goes."""

    output_path: str


def write_part(config: PartConfig) -> None:
    """Write a marker file."""
    atomic_write_text(f"{config.output_path}/part.txt", "part")
