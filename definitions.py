"""Entry point of the marin-dagster code location (``workspace.yaml`` points here)."""

from marin_assets.definitions import build_definitions

defs = build_definitions()
