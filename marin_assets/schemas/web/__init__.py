"""Marin's ``marin.schemas.web``."""
