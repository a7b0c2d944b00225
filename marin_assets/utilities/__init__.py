"""Marin's ``marin.utilities``."""
