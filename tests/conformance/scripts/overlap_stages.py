"""Marin's overlap and dedup names in one script, run on local files written beside it: decon's
TRAIN_TEST_OVERLAP, the older ``train_test_overlap.run_data_overlap``, exact paragraph dedup under its
EXACT_PARAGRAPH_DEDUPLICATE name, and the ``src.marin`` spelling of Marin's repository root."""

from src.marin.execution.executor import ExecutorStep, executor_main, this_output_path
from src.marin.processing.classification.decon import DeconConfig, DeconMode, NGramConfig, decontaminate
from src.marin.processing.classification.deduplication.pipeline import DedupeConfig, DedupMode, deduplicate
from train_test_overlap.run_data_overlap import DataOverlapPipelineConfig, run_data_overlap

overlap = ExecutorStep(
    name="train_test_overlap/decon-eval",
    fn=decontaminate,
    config=DeconConfig(
        input_path="eval/",
        output_path=this_output_path(),
        attribute_name="overlap",
        mode=DeconMode.TRAIN_TEST_OVERLAP,
        decontaminate_source="train/",
        ngram=NGramConfig(ngram_length=[5], overlap_threshold=0.5),
    ),
)
helm_overlap = ExecutorStep(
    name="train_test_overlap/helm-style",
    fn=run_data_overlap,
    config=DataOverlapPipelineConfig(
        input_data="train/", scenario_data="scenarios.jsonl", output_path=this_output_path(), N=[5]
    ),
)
paragraphs = ExecutorStep(
    name="attributes/exact-paragraphs",
    fn=deduplicate,
    config=DedupeConfig(input_path="train/", mode=DedupMode.EXACT_PARAGRAPH_DEDUPLICATE),
)

if __name__ == "__main__":
    executor_main([overlap, helm_overlap, paragraphs])
