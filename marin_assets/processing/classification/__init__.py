"""Marin's ``marin.processing.classification``: ``fasttext.train_fasttext`` (training step), ``inference``
(quality attributes), ``dedupe`` (duplicate attributes) and ``consolidate`` (filters applying them)."""
