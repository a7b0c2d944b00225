"""Marin's older ``experiments.dclm`` package (``tokenize_dclm``)."""
