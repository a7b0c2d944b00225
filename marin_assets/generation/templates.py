"""Marin's ``marin.generation.templates``: prompt templates with an ``{example}`` placeholder."""

STEP_BY_STEP_TEMPLATE = "{example}\n\nLet's think step by step."
