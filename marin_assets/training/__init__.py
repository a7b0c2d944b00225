"""Marin's ``marin.training`` names: the Levanter training step function."""
