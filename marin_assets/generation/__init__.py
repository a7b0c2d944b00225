"""Marin's ``marin.generation``: language-model inference over datasets as steps (see ``docs/generation.md``)."""
