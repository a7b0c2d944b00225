"""Marin's experiments/tutorials/exp1096_datashop_example.py, unmodified but for the prompt: Marin imports
FINEMATH_DATA_FILTER_PROMPT from experiments/exp939_finemath.py, which a team copies; it is inlined here."""

from experiments.datashop.datashop_datasets import (
    datashop_dclm_tutorial_annotation_subset,
    datashop_dclm_tutorial_pretraining_subset,
)
from experiments.datashop.datashop_runner import DatashopRunner, DatashopRunnerConfig

FINEMATH_DATA_FILTER_PROMPT = """Evaluate whether this extract teaches mathematics.

{example}

Final score: <0-5>"""

datashop_runner_config = DatashopRunnerConfig(
    experiment_name="datashop-tutorial",
    annotator_model_name="meta-llama/Llama-3.1-8B-Instruct",
    pretraining_data_path=datashop_dclm_tutorial_pretraining_subset,
    annotator_data_path=datashop_dclm_tutorial_annotation_subset,
    data_filter_prompt=FINEMATH_DATA_FILTER_PROMPT,
    dataset_output_processor_config_kwargs={"processor_type": "finalscore0-5"},
)

datashop_runner = DatashopRunner(datashop_runner_config)

if __name__ == "__main__":
    datashop_runner.run_eval_cluster_steps()
