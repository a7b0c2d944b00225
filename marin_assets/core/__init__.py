"""Shared building blocks of the stages: shard I/O (``io``), the shard-stage base (``shard_stage``),
document-file listing (``documents``), Marin's ``marin.core.runtime`` (``runtime``: ``TaskConfig``,
file mapping helpers)."""
