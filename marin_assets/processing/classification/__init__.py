"""Marin's ``marin.processing.classification``: quality attributes, dedup, consolidation."""
