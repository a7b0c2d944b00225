"""Marin's ``marin.processing.classification.deduplication`` package: exact paragraph and document
deduplication (``.pipeline``: ``DedupeConfig``, ``DedupMode``, ``deduplicate``; ``.exact``:
``dedup_exact_paragraph``, ``dedup_exact_document``)."""
