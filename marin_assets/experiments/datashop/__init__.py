"""Marin's ``experiments.datashop``: the datashop (MEDU) recipe as steps -- label, train, filter, anneal."""
