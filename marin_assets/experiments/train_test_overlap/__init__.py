"""Marin's ``experiments.train_test_overlap``: train/test n-gram overlap of pretraining shards (``utils``)."""
