"""The names issue 38 found missing, as Marin's scripts use them (fast, in process): the registries build
at import and hash as Marin's rule says (pinned versions written out as Marin computes them), the datashop
and generation names exist with Marin's config classes, the DedupMode members and ``src.marin`` spelling
resolve, and a missing ``experiments.X`` names the Marin file to copy. The unmodified scripts are run in
``test_marin_stage_scripts.py`` (slow)."""

from __future__ import annotations

import dataclasses

import pytest

from marin_assets.execution.versioning import StepGraph
from tests.conftest import marin_hash

RAW_FINEWEB_EDU = {"name": "raw/fineweb-edu", "config": {}, "dependencies": []}
TOKENIZED_FINEWEB_EDU = {
    "name": "tokenized/fineweb-edu",
    "config": {"train_paths.[0]": "DEP[0]/data", "validation_paths": [], "tokenizer": "meta-llama/Meta-Llama-3.1-8B"},
    "dependencies": [RAW_FINEWEB_EDU],
}
FINEMATH = {"name": "raw/finemath", "config": {}, "dependencies": []}


def test_registries_build_and_land_where_marins_do(tmp_path):
    from experiments.dclm.tokenize_dclm import dclm_components_llama3, dclm_mixture_config_llama3
    from experiments.dolma.tokenize_dolma import dolma_llama3_tokenized
    from experiments.midtraining_datasets import finemath, finemath_3_plus_tokenized
    from experiments.models import MARIN_MODELS, llama_3_1_8b_instruct
    from experiments.pretraining_datasets import DATASETS, dclm_baseline, simple_tokenized
    from experiments.pretraining_datasets.dclm import DCLM_MIXTURE_WEIGHTS
    from experiments.pretraining_datasets.simple import downloads

    prefix = str(tmp_path)
    steps = [
        simple_tokenized["fineweb_edu"],
        *dclm_components_llama3.values(),
        dolma_llama3_tokenized["dolma/wiki"],
        finemath_3_plus_tokenized,
        llama_3_1_8b_instruct,
    ]
    graph = StepGraph(steps, prefix)

    def path(step) -> str:
        return graph.resolved(step).output_path[len(prefix) + 1 :].rstrip("/")

    assert path(simple_tokenized["fineweb_edu"]) == f"tokenized/fineweb-edu-{marin_hash(TOKENIZED_FINEWEB_EDU)}"
    assert path(downloads["fineweb_edu"].step) == "raw/fineweb-edu-87f0914"
    assert path(dclm_components_llama3["dclm_baseline"]) == "tokenized/dclm_baseline-0206f1"
    assert path(dclm_components_llama3["proofpile_2"]) == "tokenized/proofpile_2-4a35c7"
    assert path(dolma_llama3_tokenized["dolma/wiki"]) == "tokenized/dolma/wiki-212315"
    assert path(finemath_3_plus_tokenized) == "tokenized/finemath_3_plus-a26b0f"
    assert path(finemath) == f"raw/finemath-{marin_hash(FINEMATH)}"
    assert path(llama_3_1_8b_instruct) == "gcsfuse_mount/models/meta-llama--Llama-3-1-8B-Instruct--0e9e39f"
    assert dclm_baseline.step.name == "raw/dclm-baseline-1.0" and dclm_baseline.name == "a3b142c"
    assert len(DATASETS["dolma"]["subsets"]) == 15 and len(MARIN_MODELS) >= 25
    assert set(DCLM_MIXTURE_WEIGHTS) == set(dclm_components_llama3)
    assert dclm_mixture_config_llama3 is not None


def test_datashop_and_generation_names_have_marins_configs():
    from experiments.datashop.datashop_runner import DatashopRunner, DatashopRunnerConfig
    from experiments.datashop.default_configs import default_text_generation_config_kwargs
    from marin.datashop.dataset_processor import AutoDatasetOutputProcessor, DatasetOutputProcessorConfig
    from marin.datashop.pipeline import MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME, CorpusContent, MEDUPipelineConfig
    from marin.generation.inference import ChunkStrategy, TextGenerationInferenceConfig, chunk_text
    from marin.generation.llm_generation import BaseLLMProvider, vLLMProvider
    from marin.generation.logits import TextLogitsConfig
    from marin.generation.pipeline import TextGeneration, vLLMTextGeneration

    fields = {f.name for f in dataclasses.fields(TextGenerationInferenceConfig)}
    assert {"template_path", "max_doc_tokens", "chunk_strategy", "num_instances", "output_filetype_override",
            "generated_text_column_name", "one_to_one_input_output_mapping"} <= fields  # fmt: skip
    assert {f.name for f in dataclasses.fields(TextLogitsConfig)} >= {
        "batch_size",
        "max_length",
        "memory_gb",
        "span_chars",
    }
    assert {f.name for f in dataclasses.fields(MEDUPipelineConfig)} >= {"corpus_contents", "max_corpus_tokens"}
    assert MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME == "final_benchmark_description_prompt.txt"
    assert issubclass(vLLMProvider, BaseLLMProvider) and issubclass(vLLMTextGeneration, TextGeneration)
    assert [c["text"] for c in chunk_text({"id": "d", "text": "ab\n\ncd"}, ChunkStrategy.PARAGRAPH)] == ["ab", "cd"]
    assert chunk_text({"id": "d", "text": "abcde"}, ChunkStrategy.CHAR, 2)[2] == {
        "id": "d_2", "text": "e", "metadata": {"source_document_id": "d"}
    }  # fmt: skip
    assert default_text_generation_config_kwargs["generated_text_column_name"] == "generated_text"
    assert CorpusContent(content=["x"], content_type="str_list").prompt_column == "text"
    assert DatasetOutputProcessorConfig("a", "b", "medu").processor_type == "medu"
    assert AutoDatasetOutputProcessor.from_processor_type("a", "b", "medu").extract_score("Final Score: Good") == 4

    # Marin's tutorial config (a prompt, no targeted corpus): every step builds; labels land at Marin's path.
    runner = DatashopRunner(
        DatashopRunnerConfig(
            experiment_name="datashop-tutorial",
            annotator_model_name="meta-llama/Llama-3.1-8B-Instruct",
            pretraining_data_path="documents/pool",
            annotator_data_path="documents/annotate",
            data_filter_prompt="Rate {example}. Final score: N",
            dataset_output_processor_config_kwargs={"processor_type": "finalscore0-5"},
        )
    )
    assert runner.labeled_documents.name == "documents/datashop-labels/datashop-tutorial"
    assert runner.get_eval_cluster_steps() == [runner.encoder_model] and len(runner.get_all_steps()) == 2


def test_dedup_modes_decon_and_the_src_spelling():
    import src.marin.execution.executor as src_executor
    from marin.processing.classification.decon import DeconConfig, DeconMode, NGramConfig
    from marin.processing.classification.dedupe import DedupMode
    from marin.processing.classification.deduplication.pipeline import DedupMode as PipelineDedupMode
    from train_test_overlap.run_data_overlap import DataOverlapPipelineConfig

    import marin_assets.execution.executor as executor

    assert src_executor is executor
    assert DedupMode.EXACT_DOC_DEDUPLICATE == "exact_doc_deduplicate"
    assert PipelineDedupMode.EXACT_PARAGRAPH_DEDUPLICATE == "exact_paragraph_deduplicate"
    assert DeconConfig(input_path="x", mode=DeconMode.TRAIN_TEST_OVERLAP, ngram=NGramConfig(13)).ngram.stride == 0
    assert DataOverlapPipelineConfig("a", "b", "c").N == [5, 9, 13]


def test_a_missing_experiments_module_names_the_marin_file_to_copy():
    with pytest.raises(ModuleNotFoundError) as error:
        import experiments.exp939_finemath  # noqa: F401
    message = str(error.value)
    assert "experiments/exp939_finemath.py" in message and "copy Marin's" in message and "\n" not in message
