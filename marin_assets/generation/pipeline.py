"""Marin's ``marin.generation.pipeline``: a batch of records in, the same records with generated text out.

:class:`TextGeneration` formats each record's ``prompt_column`` into ``template`` (``{example}``), asks the
provider, and adds ``generated_text_column_name`` (and ``prompt`` with ``save_templated_prompt``).
:class:`vLLMTextGeneration` is Marin's class: it builds the provider itself (here :func:`auto_provider`:
vLLM on an accelerator, ``transformers`` otherwise), truncates each example to ``max_doc_tokens`` tokens
and applies the tokenizer's chat template when asked and the tokenizer has one.
"""

from __future__ import annotations

import logging
from typing import Any

from marin_assets.generation.llm_generation import BaseLLMProvider, auto_provider
from marin_assets.generation.templates import STEP_BY_STEP_TEMPLATE

logger = logging.getLogger(__name__)


class TemplateError(ValueError):
    """A template that does not format with ``{example}`` alone (names the placeholder it lacks)."""


def format_template(template: str, example: str) -> str:
    """``template.format(example=example)``, with a one-line error for a template with other fields.

    Raises:
        TemplateError: the template names a field other than ``example`` (or has a stray brace).
    """
    try:
        return template.format(example=example)
    except (KeyError, IndexError, ValueError) as error:
        raise TemplateError(
            f"prompt template does not format with only {{example}} ({type(error).__name__}: {error}); "
            "double the braces that are not placeholders ({{ }})"
        ) from error


class TextGeneration:
    """Generate for a batch (a dict of columns, Ray Data's batch format)."""

    def __init__(
        self,
        llm: BaseLLMProvider,
        template: list[str] | str | None = None,
        num_generations: int = 1,
        prompt_column: str = "text",
        save_templated_prompt: bool = False,
        generated_text_column_name: str = "generated_text",
    ) -> None:
        self.llm = llm
        self.template = template or STEP_BY_STEP_TEMPLATE
        self.num_generations = num_generations
        self.prompt_column = prompt_column
        self.save_templated_prompt = save_templated_prompt
        self.generated_text_column_name = generated_text_column_name

    def _templates(self, n: int) -> list[str]:
        if isinstance(self.template, list):
            if len(self.template) != n:
                raise ValueError(f"{len(self.template)} templates for {n} examples: give one per example")
            return self.template
        return [self.template] * n

    def prompts(self, examples: list[str]) -> list[str]:
        """The prompts for ``examples`` (the model's input)."""
        return [format_template(t, e) for t, e in zip(self._templates(len(examples)), examples, strict=True)]

    def _update_batch(self, batch: dict[str, Any], generated_text: list[str], prompts: list[str]) -> dict[str, Any]:
        batch[self.generated_text_column_name] = generated_text
        if self.save_templated_prompt:
            batch["prompt"] = prompts
        return batch

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        prompts = self.prompts(list(batch[self.prompt_column]))
        return self._update_batch(batch, self.llm.generate(prompts), prompts)


class vLLMTextGeneration(TextGeneration):  # noqa: N801 -- Marin's name
    """Marin's generator class: builds its own provider (vLLM, or transformers without one)."""

    def __init__(
        self,
        model_name: str,
        engine_kwargs: dict[str, Any] | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        template: list[str] | str | None = None,
        num_generations: int = 1,
        num_instances: tuple[int, int] = (1, 4),
        prompt_column: str = "text",
        apply_chat_template: bool = True,
        save_templated_prompt: bool = False,
        max_doc_tokens: int = 7000,
        generated_text_column_name: str = "generated_text",
    ) -> None:
        llm = auto_provider(model_name, engine_kwargs, generation_kwargs)
        super().__init__(
            llm, template, num_generations, prompt_column, save_templated_prompt, generated_text_column_name
        )
        self.apply_chat_template = apply_chat_template
        self.max_doc_tokens = max_doc_tokens
        self.tokenizer = llm.tokenizer
        # A tokenizer without a chat template (a base model, the project's own) gets the plain prompt.
        self.uses_chat_template = apply_chat_template and bool(getattr(self.tokenizer, "chat_template", None))

    def _truncate_example(self, example: str) -> str:
        tokens = self.tokenizer.encode(example, add_special_tokens=False)
        if len(tokens) > self.max_doc_tokens:
            return self.tokenizer.decode(tokens[: self.max_doc_tokens])
        return example

    def prompts(self, examples: list[str]) -> list[str]:
        out = []
        for template, example in zip(self._templates(len(examples)), examples, strict=True):
            prompt = format_template(template, self._truncate_example(example))
            if self.uses_chat_template:
                prompt = self.tokenizer.apply_chat_template(
                    [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
                )
            out.append(prompt)
        return out
