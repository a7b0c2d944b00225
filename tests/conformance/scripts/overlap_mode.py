"""Marin's DedupMode-era train/test overlap shape (experiments/train_test_overlap/train_test_total.py):
the eval set is produced by one step as a single ``.jsonl.zst`` file, and a dedupe step in
``mode=DedupMode.TRAIN_TEST_OVERLAP`` marks the paragraphs of a training corpus (a single
``.json.gz`` file) that share word n-grams with it.

Offline: a local file in place of the gs:// training corpus.
"""

import json
import logging
import os
from dataclasses import dataclass

import fsspec
import zstandard
from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned
from marin.processing.classification.dedupe import DedupeConfig, DedupMode, NGramConfig, dedupe

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
logger = logging.getLogger(__name__)

QUESTIONS = [
    "Which of the following is a prime number: four, six, nine, eleven, fifteen, twenty or thirty?",
    "The capital city of the country that hosted the first modern olympic games in the year 1896 is?",
]


@dataclass(frozen=True)
class EvalConfig:
    output_path: str
    name: str


def write_eval_set(config: EvalConfig) -> None:
    lines = "".join(json.dumps({"id": f"{config.name}-{i}", "text": q}) + "\n" for i, q in enumerate(QUESTIONS))
    with fsspec.open(os.path.join(config.output_path, f"{config.name}.jsonl.zst"), "wb") as handle:
        handle.write(zstandard.ZstdCompressor().compress(lines.encode()))


def run_train_test_overlap(config: DedupeConfig) -> str:
    logger.info(f"Starting train-test overlap dedupe with config: {config}")
    dedupe(config)
    return config.output_path


eval_step = ExecutorStep(
    name="train_test_overlap/eval/mmlu",
    fn=write_eval_set,
    config=EvalConfig(output_path=this_output_path(), name=versioned("mmlu")),
)

overlap_step = ExecutorStep(
    name="train_test_overlap/dolma/total/corpus",
    fn=run_train_test_overlap,
    config=DedupeConfig(
        input_path="documents/corpus.json.gz",
        output_path=this_output_path(),
        decontaminate_source=output_path_of(eval_step, "mmlu.jsonl.zst"),
        attribute_name="ngram_overlap",
        false_positive_rate=1e-20,
        ngram=NGramConfig(ngram_length=[5, 10], overlap_threshold=1e-6, stride=0),
        processes=4,
        mode=DedupMode.TRAIN_TEST_OVERLAP,
    ),
)

if __name__ == "__main__":
    executor_main(steps=[overlap_step], description="Run train-test-overlap dedupe against an eval set")
