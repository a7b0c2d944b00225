"""Marin's ``marin.schemas``: config schemas shared by stages."""
