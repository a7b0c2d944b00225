"""Marin's ``marin.web``: turning a web page into text."""
