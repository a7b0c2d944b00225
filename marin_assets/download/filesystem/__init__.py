"""Marin's ``marin.download.filesystem``: copies between storage locations."""
