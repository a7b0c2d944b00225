"""Marin's ``marin.classifiers``: what quality classifiers learn from."""
