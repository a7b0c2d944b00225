"""Marin's ``marin.datashop``: LLM-labelled quality filtering (the MEDU recipe); see ``docs/curation.md``."""
