"""Marin's ``marin.download``: datasets as steps, offline."""
