"""Data curation: landing zone of data drops, per-drop stages (raw, HTML->text, quality, dedup,
consolidate), sample corpus and the Dagster sensor (``sensor.py``, the only Dagster import)."""
