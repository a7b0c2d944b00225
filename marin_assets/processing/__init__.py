"""Marin's ``marin.processing`` names (tokenization) for scripts that import them."""
