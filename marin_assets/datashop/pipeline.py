"""Marin's ``marin.datashop.pipeline``: the MEDU recipe's own steps.

* :func:`run_data_filter_prompt_generation_pipeline` (``MEDUPipelineConfig``): from examples of a target corpus
  (``corpus_contents``), the model writes descriptions of what useful documents teach, merges them pairwise
  until one is left, and the step writes the document-labelling prompt built from it to
  ``<output_path>/final_benchmark_description_prompt.txt`` (:data:`MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME`).
  The labelling step (``marin.generation.inference.run_inference`` with ``template_path``) reads it.
* :func:`run_medu_dataset_sampling_pipeline` (``DatasetOutputProcessorConfig``): parses the labeller's answers
  into scores and writes ``converted/`` (``{"text", "label"}``), ``attributes/`` (Marin's attribute layout,
  ``{"id", "attributes": {"datashop": {"score", "parsed"}}}``, co-sharded with the labelled documents) and
  ``sampled/`` (every parsed score weighted equally, Marin's choice). Unparsable answers are counted
  (``score_distribution[-1]``, ``unparsable``), never a failure.

The model runs with vLLM where it is installed and on an accelerator, else with ``transformers``
(:mod:`marin_assets.generation.llm_generation`). Marin runs :class:`MEDUPipeline` as a Ray actor on a TPU
slice; here it is a plain object inside the step, which the engine places by the step's ``resources``.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Literal

from marin_assets.core.documents import step_path
from marin_assets.core.io import iter_records
from marin_assets.datashop.dataset_processor import UNPARSABLE, AutoDatasetOutputProcessor, DatasetOutputProcessorConfig
from marin_assets.datashop.templates import (
    MEDU_BENCHMARK_DESCRIPTION_MERGING_TEMPLATE,
    MEDU_BENCHMARK_DESCRIPTION_TEMPLATE,
    MEDU_DOCUMENT_LABELING_PROMPT,
)
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import atomic_write_text, filesystem, join_path
from marin_assets.generation.dataset import DatasetSampler
from marin_assets.generation.llm_generation import auto_provider

logger = logging.getLogger(__name__)

MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME = "final_benchmark_description_prompt.txt"
DATASHOP_ATTRIBUTE = "datashop"


@dataclass
class CorpusContent:
    """Examples of the corpus a datashop run targets (Marin's fields).

    Attributes:
        content: the examples (``str_list``) or a file / folder of JSON lines (``filepath``).
        content_type: ``"str_list"`` or ``"filepath"``.
        prompt_column: the field holding the text in those files.
        glob_pattern: files below a ``filepath`` folder (``"*.jsonl.gz"``); None: ``content`` is one file.
    """

    content: list[str] | StepPath
    content_type: Literal["str_list", "filepath"]
    prompt_column: str = "text"
    glob_pattern: str | None = None


@dataclass
class MEDUPipelineConfig:
    """Marin's config of the prompt-generation step (same fields; ``resource_config`` accepted, not applied)."""

    model_name: StepPath
    corpus_contents: list[CorpusContent]
    input_path: StepPath
    output_path: StepPath
    prompt_column: str = "text"
    filetype: str = "jsonl.gz"
    engine_kwargs: dict[str, Any] | None = None
    generation_kwargs: dict[str, Any] | None = None
    num_instances: tuple[int, int] = (1, 4)
    save_templated_prompt: bool = False
    output_filetype_override: str = "jsonl.gz"
    resource_config: Any = None
    medu_benchmark_description_template: str = MEDU_BENCHMARK_DESCRIPTION_TEMPLATE
    max_corpus_tokens: int = 7000


def _corpus_texts(content: CorpusContent) -> list[str]:
    """The example texts of one :class:`CorpusContent`.

    Raises:
        ValueError: a record without ``prompt_column`` (file and line named), or an unknown content type.
    """
    if content.content_type == "str_list":
        return list(content.content) if isinstance(content.content, list) else [step_path(content.content)]
    if content.content_type != "filepath":
        raise ValueError(f"CorpusContent.content_type must be 'str_list' or 'filepath', got {content.content_type!r}")
    assert not isinstance(content.content, list)
    location = step_path(content.content)
    if content.glob_pattern:
        fs, root = filesystem(location)
        files = sorted(fs.glob(join_path(root, content.glob_pattern)))
        protocol = location.split("://", 1)[0] + "://" if "://" in location else ""
        files = [protocol + f if protocol and not f.startswith(protocol) else f for f in files]
    else:
        files = [location]
    texts = []
    for path in files:
        for line, row in iter_records(path):
            if not isinstance(row, dict) or not isinstance(row.get(content.prompt_column), str):
                raise ValueError(f"{path}:{line}: no {content.prompt_column!r} text in this record")
            texts.append(row[content.prompt_column])
    return texts


class MEDUPipeline:
    """Describe the target corpus, merge the descriptions, build the labelling prompt (Marin's stages)."""

    def __init__(
        self,
        model_name: str,
        corpus_contents: list[CorpusContent],
        tensor_parallel_size: int = 1,
        engine_kwargs: dict[str, Any] | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        medu_benchmark_description_template: str = MEDU_BENCHMARK_DESCRIPTION_TEMPLATE,
        max_corpus_tokens: int = 7000,
    ) -> None:
        self.llm = auto_provider(model_name, engine_kwargs, generation_kwargs)
        self.tokenizer = self.llm.tokenizer
        self.corpus_contents = corpus_contents
        self.medu_benchmark_description_template = medu_benchmark_description_template
        self.max_corpus_tokens = max_corpus_tokens
        self.generated_benchmark_descriptions: list[str] = []
        self.final_benchmark_description_prompt = ""

    def _chat(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        return prompt

    def get_benchmark_description_prompt(self) -> list[str]:
        """Stage 1: one description per corpus content (each corpus cut to ``max_corpus_tokens``)."""
        prompts = []
        for content in self.corpus_contents:
            corpus = "".join(text + "\n\n" for text in _corpus_texts(content))
            tokens = self.tokenizer.encode(corpus, add_special_tokens=False)
            if len(tokens) > self.max_corpus_tokens:
                corpus = self.tokenizer.decode(tokens[: self.max_corpus_tokens])
            prompts.append(self._chat(self.medu_benchmark_description_template.format(corpus=corpus)))
        self.generated_benchmark_descriptions = self.llm.generate(prompts)
        random.Random(42).shuffle(self.generated_benchmark_descriptions)  # Marin's seed: merge order varies
        return self.generated_benchmark_descriptions

    def merge_benchmark_description_prompts(self) -> str:
        """Stage 2: merge descriptions pairwise until one is left; returns the labelling prompt."""
        descriptions = list(self.generated_benchmark_descriptions)
        if not descriptions:
            raise ValueError("no benchmark descriptions to merge: give MEDUPipelineConfig.corpus_contents")
        while len(descriptions) > 1:
            pairs = list(zip(descriptions[0::2], descriptions[1::2], strict=False))
            merged = self.llm.generate([
                self._chat(MEDU_BENCHMARK_DESCRIPTION_MERGING_TEMPLATE.format(description_a=a, description_b=b))
                for a, b in pairs
            ])  # fmt: skip
            descriptions = merged + ([descriptions[-1]] if len(descriptions) % 2 else [])
        self.final_benchmark_description_prompt = MEDU_DOCUMENT_LABELING_PROMPT.format(
            test_description=descriptions[0].replace("{", "{{").replace("}", "}}"), example="{example}"
        )
        return self.final_benchmark_description_prompt


def run_data_filter_prompt_generation_pipeline(config: MEDUPipelineConfig) -> dict[str, Any]:
    """Step function (Marin's name): write the labelling prompt generated from ``corpus_contents``."""
    pipeline = MEDUPipeline(
        step_path(config.model_name), config.corpus_contents, 1, config.engine_kwargs, config.generation_kwargs,
        config.medu_benchmark_description_template, config.max_corpus_tokens,
    )  # fmt: skip
    descriptions = pipeline.get_benchmark_description_prompt()
    prompt = pipeline.merge_benchmark_description_prompts()
    path = join_path(step_path(config.output_path), MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME)
    atomic_write_text(path, prompt)
    return {"descriptions": len(descriptions), "prompt_chars": len(prompt), "prompt_path": path}


def run_medu_dataset_sampling_pipeline(config: DatasetOutputProcessorConfig) -> dict[str, Any]:
    """Step function (Marin's name): scores out of the labeller's answers, as examples, attributes and a sample.

    Raises:
        ValueError: an unknown ``processor_type``, or no answer parsed at all (nothing to train on).
        FileNotFoundError: no labelled files below ``input_path``.
    """
    output_path = step_path(config.output_path)
    converted = join_path(output_path, "converted")
    processor = AutoDatasetOutputProcessor.from_processor_type(
        step_path(config.input_path), converted, config.processor_type,
        attributes_path=join_path(output_path, "attributes"), attribute_name=DATASHOP_ATTRIBUTE,
    )  # fmt: skip
    distribution = processor.convert_dataset()
    unparsable = distribution.get(UNPARSABLE, 0)
    parsed = {score: n for score, n in distribution.items() if score != UNPARSABLE and n > 0}
    if unparsable:
        logger.warning("%d labelled documents gave no %s score (counted as -1, not sampled)", unparsable,
                       config.processor_type)  # fmt: skip
    if not parsed:
        raise ValueError(
            f"none of the {unparsable} answers below {config.input_path} holds a {config.processor_type!r} score: "
            "check the labelling prompt and the model"
        )
    sampler = DatasetSampler(converted, join_path(output_path, "sampled"), {s: 1.0 for s in parsed})
    sampled = sampler.sample_dataset()
    return {
        "labelled": sum(distribution.values()),
        "unparsable": unparsable,
        "score_distribution": {str(k): v for k, v in sorted(distribution.items())},
        "sampled": sampled.get("documents_out", 0),
        "quarantined": processor.metadata.get("quarantined", 0),
    }


__all__ = [
    "MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME",
    "CorpusContent",
    "DatasetOutputProcessorConfig",
    "MEDUPipeline",
    "MEDUPipelineConfig",
    "run_data_filter_prompt_generation_pipeline",
    "run_medu_dataset_sampling_pipeline",
]
