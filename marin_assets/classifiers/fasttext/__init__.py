"""Marin's ``marin.classifiers.fasttext``: the fastText training core."""
