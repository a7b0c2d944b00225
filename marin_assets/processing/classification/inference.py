"""Marin's ``marin.processing.classification.inference``: score documents with a classifier.

``run_inference(InferenceConfig(input_path, output_path, model_name, attribute_name, model_type))``
reads every ``**/*.<filetype>`` file below ``input_path`` and writes, at the same relative path below
``output_path``, one attribute record per document (Marin's layout and schema)::

    {"id": ..., "attributes": {<attribute_name>: {"__label__hq": p, "__label__lq": q}}}

with the probability of every label of the fastText model (newlines collapsed, as it was trained).
``consolidate``'s ``classify`` filter reads these files by the same relative path. The model is
``<model_name>/model.bin`` (``output_path_of(train step)``) or a ``.bin`` path.

``model_type`` ``"fasttext"`` (or None with a fastText ``model.bin``) is what runs here; Marin's other
types (``fineweb``, ``bert``, ``gte``, ``compression``, ``vllm``) need models this machine does not
have, and fail with an error naming the type. A :class:`~marin_assets.core.shard_stage.DocumentStage`:
files run as parallel shard tasks, a document whose ``text`` is not a string is quarantined.
``runtime``, ``task``, ``batch_size``, ``resume`` and ``classifier_kwargs`` are Marin's scheduling
knobs, accepted for its scripts; a step here always rewrites its files from scratch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from marin_assets.classifiers.fasttext.training import MODEL_FILE, fasttext_line, load_model
from marin_assets.core.runtime import TaskConfig
from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine, find_shards
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.step import StepPath

SUPPORTED_MODEL_TYPES = ("fasttext",)


@dataclass
class RuntimeConfig:
    """Marin's per-task resources (memory, extra Ray resources)."""

    memory_limit_gb: float
    resources: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetSchemaConfig:
    """Marin's input/output columns of inference."""

    input_columns: list[str] = field(default_factory=lambda: ["text", "id"])
    output_columns: list[str] = field(default_factory=lambda: ["id", "attributes"])
    id_column: tuple[str, ...] = ("id",)


@dataclass
class InferenceConfig:
    """Marin's config of the inference step.

    Attributes:
        input_path: folder of documents to score (any depth).
        model_name: the classifier: a folder holding ``model.bin`` or a ``.bin`` path.
        attribute_name: key of the scores in each record's ``attributes``.
        model_type: ``"fasttext"`` (None: fastText).
        output_path: where the attribute files go (same relative paths as the inputs).
        filetype: extension of the input files.
    """

    input_path: StepPath
    model_name: StepPath
    attribute_name: str
    model_type: str | None = None
    output_path: StepPath | None = None
    runtime: RuntimeConfig = field(default_factory=lambda: RuntimeConfig(memory_limit_gb=0.1))
    task: TaskConfig = field(default_factory=TaskConfig)
    filetype: str = "jsonl.gz"
    batch_size: int = 512
    resume: bool = True
    classifier_kwargs: dict = field(default_factory=dict)
    dataset_schema: DatasetSchemaConfig = field(default_factory=DatasetSchemaConfig)


class FasttextInferenceStage(DocumentStage):
    """Per document: ``{id, attributes: {<attribute_name>: {label: probability}}}`` (mirrored files)."""

    stage = "inference"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, config: InferenceConfig) -> None:
        assert config.output_path is not None
        super().__init__(config.input_path, config.output_path)
        self.config = config

    def shards(self) -> list[str]:
        return find_shards(self.input_path, f".{self.config.filetype}")

    def open_shard(self, shard: str) -> Any:
        return load_model(self.config.model_name)

    def process(
        self, record: dict[str, Any], model: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        text = record.get("text")
        if not isinstance(text, str):
            quarantine.add("no_text", f"text is {type(text).__name__}", line=line, doc_id=record.get("id"))
            return None
        labels, probs = model.predict(fasttext_line(text), k=-1)
        scores = {label: float(min(1.0, max(0.0, p))) for label, p in zip(labels, probs, strict=True)}
        if labels:
            counters.counts[f"predicted{labels[0]}"] += 1
        return {"id": record["id"], "attributes": {self.config.attribute_name: scores}}

    def summarize(self, results: list) -> dict[str, Any]:
        predicted: Counter[str] = Counter()
        for r in results:
            for key, value in r.counts.items():
                if key.startswith("predicted__label__"):
                    predicted[key.removeprefix("predicted")] += value
        return {
            "predicted_labels": table_markdown([{"label": k, "documents": v} for k, v in sorted(predicted.items())])
        }


def run_inference(inference_config: InferenceConfig) -> dict[str, Any]:
    """Step function (Marin's name): score every document; returns materialization metadata.

    Raises:
        ValueError: no ``output_path``, or a ``model_type`` other than fastText.
        FileNotFoundError: no input files, or no model.
    """
    config = inference_config
    if not config.output_path:
        raise ValueError("InferenceConfig.output_path is required")
    model_type = config.model_type or "fasttext"
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"model_type {model_type!r} is not available here (supported: {', '.join(SUPPORTED_MODEL_TYPES)}); "
            f"train a fastText classifier with processing.classification.fasttext.train_fasttext.train and pass "
            f"its output (a folder with {MODEL_FILE}) as model_name"
        )
    stage = FasttextInferenceStage(config)
    if not stage.shards():
        raise FileNotFoundError(f"no *.{config.filetype} files below {config.input_path}")
    load_model(config.model_name)  # a missing model fails the step once, before any shard task
    meta = stage.run()
    return {k: v for k, v in meta.items() if not k.startswith("predicted__label__")}
