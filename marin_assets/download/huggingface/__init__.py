"""Marin's ``marin.download.huggingface``: a Hugging Face dataset from the local cache."""
