"""Marin's ``marin.generation.inference``: batch generation over a dataset, as a step.

``run_inference(TextGenerationInferenceConfig(input_path, output_path, model_name, engine_kwargs,
generation_kwargs, template=... | template_path=...))`` reads every ``**/*.<filetype>`` file below
``input_path`` (JSON lines: plain, gzip or zstd), formats each record's ``prompt_column`` into the template
(``{example}``), generates, and writes every record with ``generated_text_column_name`` added (and
``prompt`` with ``save_templated_prompt``) to the same relative path below ``output_path``, the suffix
``.<output_filetype_override>`` when given. ``chunk_strategy`` splits documents first (Marin's
``chunk_text``: ids ``<id>_<n>``, ``metadata.source_document_id``).

How it runs here (Marin uses Ray Data actors on TPUs):

* **Back end**: vLLM where it is installed and an accelerator is visible, ``transformers`` generation
  otherwise (:func:`~marin_assets.generation.llm_generation.choose_backend`).
* **Sharded like every stage** (:class:`~marin_assets.core.shard_stage.ShardStage`): one task per input
  file, Ray tasks when the engine launched the step on Ray, else in this process. With vLLM the files
  run one after the other in the step's own task, which holds the accelerator.
* **Resumable per shard**: each output file is written atomically when its input file is finished; a
  new attempt of the step (which adopts the failed attempt's folder) skips the files already there and
  counts them as ``shards_resumed``.
* A record whose ``prompt_column`` is not a string is quarantined (``quarantine/``), not generated for.

``num_instances``, ``tensor_parallel_size``, ``preserve_order``, ``one_to_one_input_output_mapping`` and
``resource_config`` are Marin's Ray Data settings, accepted; files always map one to one here, in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.core.io import JsonlShardWriter, iter_records
from marin_assets.core.shard_stage import Counters, Quarantine, ShardPool, ShardResult, ShardStage, find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import exists, join_path, read_text


class ChunkStrategy(StrEnum):
    """How ``chunk_text`` splits a document before generation (Marin's values)."""

    CHAR = "char"
    PARAGRAPH = "paragraph"


@dataclass
class TextGenerationInferenceConfig:
    """Marin's config of a generation step (same fields and defaults, ``resource_config`` aside).

    Attributes:
        input_path: folder of records (any depth).
        output_path: where the records with generated text go (same relative paths).
        model_name: a local model folder (an HF export), a ``gs://`` folder or a name in the local HF cache.
        engine_kwargs: vLLM ``LLM(...)`` settings (``transformers``: ``dtype``, ``device``, ``max_model_len``).
        generation_kwargs: vLLM ``SamplingParams`` (``temperature``, ``max_tokens``, ``top_p``,
            ``truncate_prompt_tokens``, ``n``, ``seed``), mapped for ``transformers``.
        template: the prompt, with ``{example}`` where the record's text goes.
        template_path: a file holding the template (exactly one of the two).
        apply_chat_template: wrap the prompt in the tokenizer's chat template (when it has one).
        save_templated_prompt: keep the prompt in each output record (``prompt``).
        max_doc_tokens: an example longer than this many tokens is cut before templating.
        chunk_strategy: split documents first (``char`` windows of ``chunk_size``, or ``paragraph``).
        chunk_size: characters per chunk for ``char``.
        batch_size: records per call of the model.
        filetype: the input files' suffix.
        output_filetype_override: the output files' suffix (None: the input's).
        prompt_column: the record field that fills ``{example}``.
        resource_config: Marin's placement of its inference actors (accepted; the step runs where its
            ``resources`` put it).
        generated_text_column_name: the field the generated text goes to.
    """

    input_path: StepPath
    output_path: StepPath
    model_name: StepPath
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    template: str | None = None
    template_path: StepPath | None = None
    apply_chat_template: bool = True
    save_templated_prompt: bool = False
    max_doc_tokens: int = 7000
    chunk_strategy: ChunkStrategy | None = None
    chunk_size: int | None = None
    num_instances: tuple[int, int] = (1, 4)
    batch_size: int = 32
    tensor_parallel_size: int = 1
    preserve_order: bool = False
    one_to_one_input_output_mapping: bool = False
    filetype: str = "jsonl.gz"
    output_filetype_override: str | None = None
    prompt_column: str = "text"
    resource_config: Any = None
    generated_text_column_name: str = "text"


def chunk_text(example: dict[str, Any], strategy: ChunkStrategy, chunk_size: int | None = None) -> list[dict[str, Any]]:
    """``example`` split into several (Marin's rule): ``char`` windows of ``chunk_size`` characters, or
    one example per non-empty line for ``paragraph``; ids become ``<id>_<n>`` with the original id in
    ``metadata.source_document_id``.

    Raises:
        ValueError: ``char`` without a positive ``chunk_size``, or an unknown strategy.
    """
    text = example.get("text", "")
    example_id = example.get("id")
    strategy = ChunkStrategy(strategy)
    if strategy is ChunkStrategy.CHAR:
        if not chunk_size or chunk_size <= 0:
            raise ValueError("chunk_size must be a positive integer for the 'char' chunk strategy")
        pieces = [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)]
    else:
        pieces = [p for p in text.split("\n") if p]
    out = []
    for n, piece in enumerate(pieces):
        new = {**example, "text": piece}
        if example_id is not None:
            new["id"] = f"{example_id}_{n}"
            new["metadata"] = {**(example.get("metadata") or {}), "source_document_id": example_id}
        out.append(new)
    return out


def resolve_template(config: TextGenerationInferenceConfig) -> str:
    """The prompt template: ``template``, or the text of ``template_path``.

    Raises:
        ValueError: neither or both given.
        FileNotFoundError: ``template_path`` does not exist.
    """
    if bool(config.template) == bool(config.template_path):
        raise ValueError("give TextGenerationInferenceConfig a template or a template_path (exactly one)")
    if config.template:
        return config.template
    assert config.template_path is not None
    text = read_text(step_path(config.template_path))
    if text is None:
        raise FileNotFoundError(f"prompt template {config.template_path} does not exist")
    return text


def output_name(relative: str, filetype: str, override: str | None) -> str:
    """``relative`` with its ``.<filetype>`` suffix replaced by ``.<override>`` (when given)."""
    suffix = "." + filetype.lstrip(".")
    if override and relative.endswith(suffix):
        return relative[: -len(suffix)] + "." + override.lstrip(".")
    return relative


class GenerationStage(ShardStage):
    """One input file -> one output file of the same records plus generated text; finished files kept."""

    stage = "generation"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, config: TextGenerationInferenceConfig, template: str) -> None:
        super().__init__(step_path(config.input_path), step_path(config.output_path))
        self.config = config
        self.template = template

    def shards(self) -> list[str]:
        return find_shards(self.input_path, "." + self.config.filetype.lstrip("."))

    def cleared_dirs(self, shards: list[str]) -> list[str]:
        return []  # finished output files are what a resumed attempt keeps (each is written atomically)

    def output_file(self, shard: str) -> str:
        rel = output_name(self.relative_path(shard), self.config.filetype, self.config.output_filetype_override)
        return join_path(self.output_path, rel)

    def generator(self) -> Any:
        from marin_assets.generation.pipeline import vLLMTextGeneration

        c = self.config
        return vLLMTextGeneration(
            step_path(c.model_name), c.engine_kwargs, c.generation_kwargs, self.template, prompt_column=c.prompt_column,
            apply_chat_template=c.apply_chat_template, save_templated_prompt=c.save_templated_prompt,
            max_doc_tokens=c.max_doc_tokens, generated_text_column_name=c.generated_text_column_name,
        )  # fmt: skip

    def records(self, shard: str, counters: Counters, quarantine: Quarantine) -> list[dict[str, Any]]:
        """The shard's records to generate for (chunked when asked); bad ones quarantined."""
        c = self.config
        out: list[dict[str, Any]] = []
        for line, record in iter_records(shard):
            counters.add("documents_in")
            value = record.get(c.prompt_column) if isinstance(record, dict) else None
            if not isinstance(value, str):
                quarantine.add(
                    "no_prompt_text", f"{c.prompt_column} is {type(value).__name__}", line=line,
                    doc_id=record.get("id") if isinstance(record, dict) else None,
                )  # fmt: skip
                continue
            out.extend(chunk_text(record, c.chunk_strategy, c.chunk_size) if c.chunk_strategy else [record])
        return out

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        target = self.output_file(shard)
        if exists(target):
            counters.add("shards_resumed")
            return {"generated_tokens": 0, "backend": None}
        records = self.records(shard, counters, quarantine)
        generation = self.generator()
        llm = generation.llm
        before = llm.generated_tokens
        c = self.config
        with counters.timer("generate+write"), JsonlShardWriter(target) as writer:
            for start in range(0, len(records), max(1, c.batch_size)):
                batch_records = records[start : start + max(1, c.batch_size)]
                columns = {c.prompt_column: [r[c.prompt_column] for r in batch_records]}
                result = generation(columns)
                for i, record in enumerate(batch_records):
                    record = {**record, c.generated_text_column_name: result[c.generated_text_column_name][i]}
                    if c.save_templated_prompt:
                        record["prompt"] = result["prompt"][i]
                    writer.write(record)
        counters.add("documents_out", writer.records)
        return {"generated_tokens": llm.generated_tokens - before, "backend": llm.backend}

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        tokens = sum(int(r.extra["generated_tokens"]) for r in results if r.extra)
        seconds = sum(r.seconds.get("generate+write", 0.0) for r in results)
        backends = sorted({r.extra["backend"] for r in results if r.extra and r.extra["backend"]})
        return {
            "generated_tokens": tokens,
            "generation_tokens_per_second": round(tokens / seconds, 1) if seconds > 0 else 0.0,
            "backend": ", ".join(backends) or "none (every shard resumed)",
            "model": self.config.model_name,
        }


def run_inference(config: TextGenerationInferenceConfig) -> dict[str, Any]:
    """Step function (Marin's name): generate for every record; returns the step's metadata.

    Raises:
        ValueError: no template (or two), or a template with placeholders other than ``{example}``.
        FileNotFoundError: no input files.
        ModelUnavailableError: the model cannot be loaded (one line naming it).
    """
    from marin_assets.core.shard_stage import shard_pool
    from marin_assets.generation.llm_generation import choose_backend

    start = time.monotonic()
    template = resolve_template(config)
    from marin_assets.generation.pipeline import format_template

    format_template(template, "")  # a bad template fails once, before any model is loaded
    stage = GenerationStage(config, template)
    if not stage.shards():
        raise FileNotFoundError(f"no *.{config.filetype} files below {config.input_path}")
    if choose_backend() == "vllm":
        with shard_pool(ShardPool(backend="local", workers=1)):  # the step's task holds the accelerator
            meta = stage.run()
    else:
        meta = stage.run()
    meta["step_seconds"] = round(time.monotonic() - start, 3)
    return meta
