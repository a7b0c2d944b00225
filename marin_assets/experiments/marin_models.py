"""Marin's ``experiments/marin_models.py`` names: the tokenizers Marin experiments refer to.

These are Hugging Face names; here they resolve offline from the local Hugging Face cache (see
``marin_assets.processing.tokenize.resolve_tokenizer``). A script may pass a local tokenizer
directory instead.
"""

marin_tokenizer = "stanford-crfm/marin-tokenizer"
llama3_tokenizer = "meta-llama/Meta-Llama-3.1-8B"
llama3_tokenizer_vocab_size = 128_256
