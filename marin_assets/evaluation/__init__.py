"""Marin's ``marin.evaluation``: Levanter perplexity / bits-per-byte and lm-eval harness tasks."""
