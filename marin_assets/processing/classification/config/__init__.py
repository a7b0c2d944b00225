"""Marin's ``marin.processing.classification.config`` package (``inference_config``)."""
