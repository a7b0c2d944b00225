"""Marin's ``experiments.speedrun`` package (``prebuilt_caches``)."""
