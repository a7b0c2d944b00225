"""Marin's experiments/train_test_overlap/dolma/overlap_starcoder.py shape: one dedupe step that marks
the paragraphs of an evaluation set whose 13-grams occur in a training corpus.

Offline: local folders (relative to the working directory) in place of the gs:// paths.
"""

import logging

from marin.execution.executor import ExecutorStep, executor_main, this_output_path
from marin.processing.classification.dedupe import DedupeConfig, NGramConfig, dedupe

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
logger = logging.getLogger(__name__)

starcoder_dedupe = ExecutorStep(
    name="train_test_overlap/decontaminate_starcoder_againstmmlu_ngram500",
    fn=dedupe,
    config=DedupeConfig(
        input_path="dolma/mmlu_dev_set/",
        output_path=this_output_path(),
        attribute_name="starcoder_overlap",
        false_positive_rate=0.00001,
        ngram=NGramConfig(
            ngram_length=13,
            overlap_threshold=0.9,
            stride=0,
        ),
        processes=4,
        decontaminate=True,
        decontaminate_path="documents/starcoderdata/",
    ),
)

if __name__ == "__main__":
    executor_main(
        steps=[starcoder_dedupe],
        description="Detect n-gram dedupe overlap",
    )
