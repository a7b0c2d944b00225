"""Marin's newer dedup entry points (``deduplication.pipeline`` and ``.exact``) on local documents:
exact document dedup, exact paragraph dedup, and ``dedup_exact_paragraph`` called from a step."""

from dataclasses import dataclass

from marin.execution.executor import ExecutorStep, executor_main, this_output_path, versioned
from marin.processing.classification.deduplication.exact import dedup_exact_paragraph
from marin.processing.classification.deduplication.pipeline import DedupeConfig, DedupMode, deduplicate

DOCS = "local_docs"

doc_dedup = ExecutorStep(
    name="dedup/exact-doc",
    fn=deduplicate,
    config=DedupeConfig(
        input_path=DOCS,
        output_path=this_output_path(),
        attribute_name="is_duplicate",
        mode=versioned(DedupMode.EXACT_DOC_DEDUPLICATE),
        processes=1,
    ),
)
paragraph_dedup = ExecutorStep(
    name="dedup/paragraph",
    fn=deduplicate,
    config=DedupeConfig(input_path=DOCS, output_path=this_output_path(), mode=DedupMode.DEDUPLICATE),
)


@dataclass(frozen=True)
class ExactParagraphConfig:
    input_paths: str
    output_path: str


def run_exact_paragraph(config: ExactParagraphConfig) -> dict:
    return dedup_exact_paragraph(input_paths=config.input_paths, output_path=config.output_path)


exact_paragraph = ExecutorStep(
    name="dedup/exact-paragraph",
    fn=run_exact_paragraph,
    config=ExactParagraphConfig(input_paths=DOCS, output_path=this_output_path()),
)

if __name__ == "__main__":
    executor_main(steps=[doc_dedup, paragraph_dedup, exact_paragraph])
