"""Marin's ``experiments/datashop/defaults.py``: the datashop recipe as steps (Marin's names and step names).

1. :func:`default_label` -- ``documents/datashop-prompts/<exp>`` (only without ``data_filter_prompt``: the MEDU
   prompt from ``targeted_documents``) and ``documents/datashop-labels/<exp>``: the annotator model answers the
   prompt for every document (``marin.generation.inference.run_inference``; vLLM on an accelerator, else
   ``transformers``).
2. :func:`default_train_quality_model` -- ``documents/datashop-datasets/<exp>`` parses the answers into scores
   (``converted/``, ``attributes/`` in Marin's attribute layout, ``sampled/``; unparsable answers counted), and
   ``classifiers/datashop-fasttext/<exp>`` trains this project's fastText classifier on the scores (Marin
   trains a BERT/GTE regressor, ``classifiers/datashop-bert/<exp>``, then copies it to
   ``gcsfuse_mount/datashop-models/``).
3. :func:`default_quality_filter` -- ``attributes/quality_filtering/datashop/<data>-<exp>``: the classifier scores
   the pretraining pool (``score`` = expected score).
4. :func:`default_consolidate` -- ``documents/quality_filtering/datashop/<data>-<exp>``: keep the top share.
5. :func:`default_candidate_anneal` -- Marin's control / candidate anneal of an 8B model on DCLM (+ the
   candidate) on a TPU slice: the steps build and dry-run; running one needs the TPU and DCLM and fails when
   it runs, saying which.

``resource_config`` becomes the step's ``resources`` (``GpuConfig(gpu_count=1)`` on a GPU cluster,
``CpuOnlyConfig()`` on CPU); Marin's TPU presets need that TPU when the step runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from marin_assets.datashop.dataset_processor import DatasetOutputProcessorConfig
from marin_assets.datashop.pipeline import (
    MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME,
    CorpusContent,
    MEDUPipelineConfig,
    run_data_filter_prompt_generation_pipeline,
    run_medu_dataset_sampling_pipeline,
)
from marin_assets.datashop.quality_classifier import DatashopClassifierConfig, train_quality_classifier
from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    StepPath,
    StepResources,
    output_path_of,
    this_output_path,
)
from marin_assets.experiments.datashop.default_configs import (
    default_consolidate_config_kwargs,
    default_consolidate_filter_config_kwargs,
    default_dataset_output_processor_config_kwargs,
    default_engine_kwargs,
    default_generation_kwargs,
    default_inference_config_kwargs,
    default_medu_config_kwargs,
    default_quality_filter_train_config_kwargs,
    default_text_generation_config_kwargs,
)
from marin_assets.generation.inference import TextGenerationInferenceConfig
from marin_assets.generation.inference import run_inference as run_generation_inference
from marin_assets.processing.classification.consolidate import ConsolidateConfig, FilterConfig, consolidate
from marin_assets.processing.classification.inference import InferenceConfig, run_inference
from marin_resources.resource_config import ResourceConfig


def _merged(defaults: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    return {**defaults, **(given or {})}


def _corpus_contents(targeted_documents: Sequence[StepPath | list[str] | CorpusContent]) -> list[CorpusContent]:
    """Marin passes paths (files of JSON lines) or lists of example texts; either becomes a ``CorpusContent``."""
    out = []
    for item in targeted_documents:
        if isinstance(item, CorpusContent):
            out.append(item)
        elif isinstance(item, list):
            out.append(CorpusContent(content=item, content_type="str_list"))
        else:
            out.append(CorpusContent(content=item, content_type="filepath"))
    return out


def default_label(
    documents_to_be_labeled: StepPath | ExecutorStep,
    targeted_documents: Sequence[StepPath | list[str] | CorpusContent],
    experiment_name: str,
    resource_config: StepResources | None,
    annotator_model_name_or_path: str = "meta-llama/Llama-3.3-70B-Instruct",
    data_filter_prompt: str | None = None,
    medu_pipeline_config_kwargs: dict | None = None,
    text_generation_inference_config_kwargs: dict | None = None,
) -> ExecutorStep:
    """The step labelling ``documents_to_be_labeled`` with the annotator model (Marin's signature).

    Give either ``data_filter_prompt`` (with ``{example}``) or ``targeted_documents`` (the MEDU prompt is then
    generated from them), not both.

    Raises:
        ValueError: both or neither given.
    """
    if isinstance(documents_to_be_labeled, ExecutorStep):
        documents_to_be_labeled = output_path_of(documents_to_be_labeled)
    if (data_filter_prompt is None) == (not targeted_documents):
        raise ValueError("default_label: give a data_filter_prompt or targeted_documents, not both (and not neither)")
    prompt_path: InputName | None = None
    if data_filter_prompt is None:
        prompt_step = ExecutorStep(
            name=f"documents/datashop-prompts/{experiment_name}",
            fn=run_data_filter_prompt_generation_pipeline,
            config=MEDUPipelineConfig(
                corpus_contents=_corpus_contents(targeted_documents),
                input_path=documents_to_be_labeled,
                output_path=this_output_path(),
                resource_config=resource_config,
                model_name=annotator_model_name_or_path,
                **_merged(default_medu_config_kwargs, medu_pipeline_config_kwargs),
            ),
            resources=resource_config,
        )
        prompt_path = output_path_of(prompt_step, MEDU_BENCHMARK_DESCRIPTION_PROMPT_FILENAME)
    return ExecutorStep(
        name=f"documents/datashop-labels/{experiment_name}",
        fn=run_generation_inference,
        config=TextGenerationInferenceConfig(
            input_path=documents_to_be_labeled,
            output_path=this_output_path(),
            template=data_filter_prompt,
            template_path=prompt_path,
            resource_config=resource_config,
            model_name=annotator_model_name_or_path,
            **_merged(default_text_generation_config_kwargs, text_generation_inference_config_kwargs),
        ),
        override_output_path=f"documents/datashop-labels/{experiment_name}",
        resources=resource_config,
    )


def default_train_quality_model(
    labeled_documents: ExecutorStep,
    experiment_name: str,
    resource_config: StepResources | None,
    dataset_processor_config_kwargs: dict | None = None,
    quality_train_config_kwargs: dict | None = None,
) -> ExecutorStep:
    """The scores parsed out of the labels, and the classifier trained on them (returns the classifier step).

    ``quality_train_config_kwargs``: :class:`DatashopClassifierConfig` fields (``fasttext_args``, ``seed``,
    ``val_frac``); Marin's ``training_config`` (a BERT trainer's) is not used by the fastText classifier.
    """
    dataset = ExecutorStep(
        name=f"documents/datashop-datasets/{experiment_name}",
        fn=run_medu_dataset_sampling_pipeline,
        config=DatasetOutputProcessorConfig(
            input_path=output_path_of(labeled_documents),
            output_path=this_output_path(),
            **_merged(default_dataset_output_processor_config_kwargs, dataset_processor_config_kwargs),
        ),
    )
    train_kwargs = _merged(default_quality_filter_train_config_kwargs, quality_train_config_kwargs)
    train_kwargs.pop("training_config", None)
    return ExecutorStep(
        name=f"classifiers/datashop-fasttext/{experiment_name}",
        fn=train_quality_classifier,
        config=DatashopClassifierConfig(
            input_doc_path=output_path_of(labeled_documents),
            attribute_path=output_path_of(dataset, "attributes"),
            output_path=this_output_path(),
            **train_kwargs,
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )


def default_quality_filter(
    encoder_model: ExecutorStep | str,
    input_data_path: StepPath | ExecutorStep,
    input_data_name: str,
    experiment_name: str,
    inference_config_kwargs: dict | None = None,
) -> ExecutorStep:
    """The classifier's scores of every document of ``input_data_path`` (attribute ``datashop-<exp>``)."""
    if isinstance(encoder_model, ExecutorStep):
        model_path: Any = output_path_of(encoder_model)
    elif isinstance(encoder_model, str):
        model_path = encoder_model
    else:
        raise ValueError(f"encoder_model must be a step or a path, got {type(encoder_model).__name__}")
    if isinstance(input_data_path, ExecutorStep):
        input_data_path = output_path_of(input_data_path)
    return ExecutorStep(
        name=f"attributes/quality_filtering/datashop/{input_data_name}-{experiment_name}",
        fn=run_inference,
        config=InferenceConfig(
            input_path=input_data_path,
            output_path=this_output_path(),
            model_name=model_path,
            attribute_name=f"datashop-{experiment_name}",
            **_merged(default_inference_config_kwargs, inference_config_kwargs),
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )


def default_consolidate(
    attributes: ExecutorStep,
    input_data_path: StepPath | ExecutorStep,
    input_data_name: str,
    experiment_name: str,
    filter_config_kwargs: dict | None = None,
    consolidate_config_kwargs: dict | None = None,
) -> ExecutorStep:
    """The documents of ``input_data_path`` the classifier ranks highest (default: the top 10% by ``score``)."""
    if isinstance(input_data_path, ExecutorStep):
        input_data_path = output_path_of(input_data_path)
    return ExecutorStep(
        name=f"documents/quality_filtering/datashop/{input_data_name}-{experiment_name}",
        fn=consolidate,
        config=ConsolidateConfig(
            input_path=input_data_path,
            output_path=this_output_path(),
            filters=[
                FilterConfig(
                    attribute_path=output_path_of(attributes),
                    name=f"datashop-{experiment_name}",
                    **_merged(default_consolidate_filter_config_kwargs, filter_config_kwargs),
                )
            ],
            **_merged(default_consolidate_config_kwargs, consolidate_config_kwargs),
        ),
    )


def default_candidate_anneal(documents: ExecutorStep | None, tpu_type: str, experiment_name: str) -> ExecutorStep:
    """Marin's control (``documents=None``: DCLM only) or candidate (70% DCLM, 30% ``documents``) anneal: an
    8B Llama trained on a ``tpu_type`` slice (needs that TPU and the DCLM caches when it runs)."""
    from marin_assets.experiments.defaults import default_tokenize, default_train
    from marin_assets.experiments.llama import llama_8b
    from marin_assets.experiments.marin_models import llama3_tokenizer
    from marin_assets.experiments.pretraining_datasets.dclm import dclm_components_llama3
    from marin_assets.experiments.simple_train_config import SimpleTrainConfig
    from marin_assets.processing.tokenize.data_configs import lm_mixture_data_config

    components: dict[str, Any] = {"dclm": dclm_components_llama3["dclm_baseline"]}
    if documents is None:
        name, weights = "datashop-control", {"dclm": 1.0}
    else:
        name = f"datashop-candidate-{experiment_name}"
        components["candidate"] = default_tokenize(
            name=name, dataset=output_path_of(documents), tokenizer=llama3_tokenizer
        )
        weights = {"dclm": 0.70, "candidate": 0.30}
    return default_train(
        name=name,
        tokenized=lm_mixture_data_config(components=components, weights=weights),
        model_config=llama_8b,
        train_config=SimpleTrainConfig(
            resources=ResourceConfig.with_tpu(tpu_type),
            train_batch_size=1024,
            num_train_steps=47_684,
            learning_rate=3e-4,
            weight_decay=0.1,
            min_lr_ratio=0.0,
            decay=1.0,
        ),  # fmt: skip
    )


def default_synthetic_data_generation(
    input_path: ExecutorStep | StepPath,
    model_name_or_path: str,
    data_generation_template: str,
    input_filetype: str,
    prompt_column: str,
    resource_config: StepResources | None,
    generated_text_column_name: str = "generated_text",
    engine_kwargs: dict = default_engine_kwargs,
    generation_kwargs: dict = default_generation_kwargs,
    output_path: str | None = None,
) -> ExecutorStep:
    """A step generating text for every record of ``input_path`` with ``data_generation_template`` (Marin's)."""
    if isinstance(input_path, ExecutorStep):
        input_path = output_path_of(input_path)
    return ExecutorStep(
        name=output_path or os.path.join("documents", "synthetic", model_name_or_path.replace("/", "--")),
        fn=run_generation_inference,
        config=TextGenerationInferenceConfig(
            input_path=input_path,
            output_path=this_output_path(),
            model_name=model_name_or_path,
            engine_kwargs=engine_kwargs,
            generation_kwargs=generation_kwargs,
            template=data_generation_template,
            prompt_column=prompt_column,
            filetype=input_filetype,
            output_filetype_override="jsonl.gz",
            one_to_one_input_output_mapping=False,
            generated_text_column_name=generated_text_column_name,
            resource_config=resource_config,
        ),  # fmt: skip
        resources=resource_config,
    )
