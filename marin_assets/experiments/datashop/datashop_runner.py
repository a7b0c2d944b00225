"""Marin's ``experiments/datashop/datashop_runner.py``: one config for the whole datashop recipe.

``DatashopRunner(DatashopRunnerConfig(...))`` builds the steps of :mod:`.defaults`; ``run_eval_cluster_steps()``
runs labelling and classifier training (Marin runs them on its vLLM cluster), ``run_all_steps()`` everything up
to the evaluations of the control and candidate anneals (TPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from marin_assets.execution.executor import executor_main
from marin_assets.execution.step import ExecutorStep, StepPath, StepResources
from marin_assets.experiments.datashop.defaults import (
    default_candidate_anneal,
    default_consolidate,
    default_label,
    default_quality_filter,
    default_train_quality_model,
)
from marin_assets.experiments.evals.evals import default_eval
from marin_assets.experiments.evals.resource_configs import SINGLE_TPU_V6E_8, TPU_V6E_8_STRICT_PACK
from marin_assets.experiments.evals.task_configs import MMLU_5_SHOT


@dataclass
class DatashopRunnerConfig:
    """Marin's fields: what to label with which model, what to filter, and where each part runs."""

    experiment_name: str
    annotator_model_name: str
    pretraining_data_path: StepPath | ExecutorStep
    annotator_data_path: StepPath | ExecutorStep
    data_filter_prompt: str | None = None
    corpus_content_paths: list[StepPath] = field(default_factory=list)
    pretraining_data_path_name: str = "datashop-dclm-pretraining-subset"
    labeler_resource_config: StepResources | None = field(default_factory=lambda: TPU_V6E_8_STRICT_PACK)
    training_tpu_type: str = "v6e-128"
    medu_pipeline_config_kwargs: dict | None = None
    dataset_output_processor_config_kwargs: dict | None = None
    quality_train_config_kwargs: dict | None = None
    text_generation_inference_config_kwargs: dict | None = None
    inference_config_kwargs: dict | None = None
    filter_config_kwargs: dict | None = None
    consolidate_config_kwargs: dict | None = None
    eval_resource_config: StepResources | None = field(default_factory=lambda: SINGLE_TPU_V6E_8)


class DatashopRunner:
    """The datashop steps of one experiment (attributes as in Marin)."""

    def __init__(self, config: DatashopRunnerConfig) -> None:
        self.config = c = config
        self.labeled_documents = default_label(
            c.annotator_data_path, c.corpus_content_paths, c.experiment_name, c.labeler_resource_config,
            c.annotator_model_name, c.data_filter_prompt, c.medu_pipeline_config_kwargs,
            c.text_generation_inference_config_kwargs,
        )  # fmt: skip
        self.encoder_model = default_train_quality_model(
            self.labeled_documents, c.experiment_name, c.labeler_resource_config,
            c.dataset_output_processor_config_kwargs, c.quality_train_config_kwargs,
        )  # fmt: skip
        self.attributes = default_quality_filter(
            self.encoder_model, c.pretraining_data_path, c.pretraining_data_path_name, c.experiment_name,
            c.inference_config_kwargs,
        )  # fmt: skip
        self.filtered_documents = default_consolidate(
            self.attributes, c.pretraining_data_path, c.pretraining_data_path_name, c.experiment_name,
            c.filter_config_kwargs, c.consolidate_config_kwargs,
        )  # fmt: skip
        self.control_model = default_candidate_anneal(None, c.training_tpu_type, c.experiment_name)
        self.quality_ablation_model = default_candidate_anneal(
            self.filtered_documents, c.training_tpu_type, c.experiment_name
        )
        self.evals = [
            default_eval(self.control_model, c.eval_resource_config, (MMLU_5_SHOT,)),
            default_eval(self.quality_ablation_model, c.eval_resource_config, (MMLU_5_SHOT,)),
        ]

    def get_eval_cluster_steps(self) -> list:
        return [self.encoder_model]

    def get_all_steps(self) -> list:
        return self.evals

    def run_eval_cluster_steps(self) -> None:
        executor_main(self.get_eval_cluster_steps())

    def run_all_steps(self) -> None:
        executor_main(self.get_all_steps())
