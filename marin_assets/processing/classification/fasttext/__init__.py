"""Marin's ``marin.processing.classification.fasttext``: the fastText training step."""
