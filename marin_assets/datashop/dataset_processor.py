"""Marin's ``marin.datashop.dataset_processor``: the labeller's answers -> scores -> training data.

``AutoDatasetOutputProcessor.from_processor_type(input_path, output_path, processor_type)`` gives the
processor of a score format; ``convert_dataset()`` reads every labelled file below ``input_path`` (records
with ``text`` and ``generated_text``), parses each answer and writes, co-sharded (same relative paths):

* ``<output_path>/<file>`` -- Marin's training examples ``{"text", "label": score}`` (parsed answers only);
* ``<attributes_path>/<file>`` (when given) -- Marin's attribute layout, one record per labelled document::

      {"id": ..., "attributes": {<attribute_name>: {"score": s, "parsed": true|false}}}

  (``score`` -1 where the answer did not parse).

Parsing never fails a file: an answer without a score is counted as score ``-1`` (``unparsable``) and
kept out of the training examples; a record without a string ``generated_text`` is quarantined with its
line. It returns the score distribution (Marin's ``{score: count}``, -1 included).

Processors: ``medu`` (``Final Score: Great|Good|Okay|Poor|Useless`` -> 5..1) and ``finalscore0-5``
(``Final score: 0..5``, any case).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

from marin_assets.core.io import JsonlShardWriter, iter_records
from marin_assets.core.shard_stage import Counters, Quarantine, ShardResult, ShardStage, find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import join_path

UNPARSABLE = -1
LABELLED_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl")


@dataclass
class DatasetOutputProcessorConfig:
    """Marin's config of the dataset processor step.

    Attributes:
        input_path: the labelled documents (a ``default_label`` step's output).
        output_path: where ``converted/``, ``attributes/`` and ``sampled/`` go.
        processor_type: ``"medu"`` or ``"finalscore0-5"``.
    """

    input_path: StepPath
    output_path: StepPath
    processor_type: str


class _ConvertStage(ShardStage):
    """One labelled file -> its training examples and its attribute records."""

    stage = "datashop_convert"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, processor: DatasetOutputProcessor) -> None:
        super().__init__(processor.input_path, processor.output_path)
        self.processor = processor

    def shards(self) -> list[str]:
        return sorted({s for suffix in LABELLED_SUFFIXES for s in find_shards(self.input_path, suffix)})

    def cleared_dirs(self, shards: list[str]) -> list[str]:
        return []  # every output file of a shard is rewritten whole (atomically) by its task

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        p = self.processor
        rel = self.relative_path(shard)
        distribution: Counter[int] = Counter()
        attributes = JsonlShardWriter(join_path(p.attributes_path, rel)) if p.attributes_path else None
        with JsonlShardWriter(join_path(p.output_path, rel)) as examples:
            for line, record in iter_records(shard):
                counters.add("documents_in")
                answer = record.get("generated_text") if isinstance(record, dict) else None
                if not isinstance(answer, str):
                    quarantine.add("no_generated_text", f"generated_text is {type(answer).__name__}", line=line,
                                   doc_id=record.get("id") if isinstance(record, dict) else None)  # fmt: skip
                    continue
                score = p.extract_score(answer)
                distribution[score] += 1
                text = record.get("text")
                if score != UNPARSABLE and isinstance(text, str) and text:
                    examples.write({"id": record.get("id"), "text": text, "label": score})
                if attributes is not None:
                    attributes.write({"id": record.get("id"), "attributes": {
                        p.attribute_name: {"score": score, "parsed": score != UNPARSABLE}}})  # fmt: skip
        if attributes is not None:
            attributes.close()
        counters.add("unparsable", distribution.get(UNPARSABLE, 0))
        return {"distribution": dict(distribution)}

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        total: Counter[int] = Counter()
        for r in results:
            total.update(r.extra["distribution"] if r.extra else {})
        return {"score_distribution": {int(k): int(v) for k, v in sorted(total.items())}}


class DatasetOutputProcessor:
    """Base: parse scores out of generated text (subclasses give :meth:`extract_score` and the values).

    Attributes:
        input_path, output_path: labelled documents in; training examples out.
        score_values: the scores an answer can give.
        attributes_path: where the attribute records go (None: not written).
        attribute_name: their key in ``attributes``.
    """

    def __init__(
        self,
        input_path: str,
        output_path: str,
        score_values: list[int],
        attributes_path: str | None = None,
        attribute_name: str = "datashop",
    ) -> None:
        self.input_path = input_path
        self.output_path = output_path
        self.score_values = score_values
        self.score_distribution: dict[int, int] = {v: 0 for v in score_values}
        self.attributes_path = attributes_path
        self.attribute_name = attribute_name
        self.metadata: dict[str, Any] = {}

    @staticmethod
    def extract_score(text: str) -> int:
        """The score in ``text``, or -1 when there is none."""
        raise NotImplementedError

    def convert_dataset(self) -> dict[int, int]:
        """Convert every labelled file (see the module docstring); returns the score distribution.

        Raises:
            FileNotFoundError: no labelled files below ``input_path``.
        """
        stage = _ConvertStage(self)
        if not stage.shards():
            raise FileNotFoundError(f"no labelled .jsonl(.gz/.zst) files below {self.input_path}")
        self.metadata = stage.run()
        for score, count in self.metadata["score_distribution"].items():
            self.score_distribution[score] = self.score_distribution.get(score, 0) + count
        return self.score_distribution


class MeduDatasetOutputProcessor(DatasetOutputProcessor):
    """``Final Score: Great|Good|Okay|Poor|Useless`` -> 5, 4, 3, 2, 1."""

    SCORE_OPTIONS_DICT: ClassVar[dict[str, int]] = {"Great": 5, "Good": 4, "Okay": 3, "Poor": 2, "Useless": 1}
    _PATTERN = re.compile(r"Final Score:\s*\**\s*(Great|Good|Okay|Poor|Useless)\b")

    def __init__(self, input_path: str, output_path: str, **kwargs: Any) -> None:
        super().__init__(input_path, output_path, list(self.SCORE_OPTIONS_DICT.values()), **kwargs)

    @staticmethod
    def extract_score(text: str) -> int:
        # The last verdict counts: a model that restates the scale before answering names every option.
        found = MeduDatasetOutputProcessor._PATTERN.findall(text)
        return MeduDatasetOutputProcessor.SCORE_OPTIONS_DICT[found[-1]] if found else UNPARSABLE


class FinalScoreZeroToFiveDatasetOutputProcessor(DatasetOutputProcessor):
    """``Final score: N`` (N in 0..5, any case) -> N."""

    SCORE_OPTIONS_DICT: ClassVar[dict[str, int]] = {str(i): i for i in range(6)}
    _PATTERN = re.compile(r"Final score:\s*\**\s*([0-5])(?![0-9.])", re.IGNORECASE)

    def __init__(self, input_path: str, output_path: str, **kwargs: Any) -> None:
        super().__init__(input_path, output_path, list(self.SCORE_OPTIONS_DICT.values()), **kwargs)

    @staticmethod
    def extract_score(text: str) -> int:
        found = FinalScoreZeroToFiveDatasetOutputProcessor._PATTERN.findall(text)
        return int(found[-1]) if found else UNPARSABLE


class AutoDatasetOutputProcessor(DatasetOutputProcessor):
    """The processor of a ``processor_type`` (Marin's registry)."""

    _PROCESSOR_TYPE_TO_CLS: ClassVar[dict[str, type[DatasetOutputProcessor]]] = {
        "medu": MeduDatasetOutputProcessor,
        "finalscore0-5": FinalScoreZeroToFiveDatasetOutputProcessor,
    }

    @classmethod
    def from_processor_type(
        cls, input_path: str, output_path: str, processor_type: str, **kwargs: Any
    ) -> DatasetOutputProcessor:
        """Raises: ValueError naming the known types for an unknown one."""
        if processor_type not in cls._PROCESSOR_TYPE_TO_CLS:
            known = ", ".join(sorted(cls._PROCESSOR_TYPE_TO_CLS))
            raise ValueError(f"unknown datashop processor_type {processor_type!r} (known: {known})")
        return cls._PROCESSOR_TYPE_TO_CLS[processor_type](input_path, output_path, **kwargs)
