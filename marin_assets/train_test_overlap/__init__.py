"""Marin's top-level ``train_test_overlap`` package (``run_data_overlap``), reachable under that name."""
