"""Marin's older ``experiments.dolma`` package (``tokenize_dolma``)."""
