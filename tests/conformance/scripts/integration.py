"""Marin's tests/integration_test.py shape, written from the API: HTML -> markdown -> fastText training
-> inference -> dedupe -> consolidate -> default_tokenize -> Levanter training (2 steps, CPU).

Offline: the HTML lives in ./tests/quickstart-data/{pos,neg} and the tokenizer in ./tests/tokenizer
(both relative to the working directory) instead of hub names.
"""

import dataclasses
import logging
import os
import sys

import draccus
from experiments.defaults import default_tokenize
from fray.cluster import ResourceConfig
from levanter.main.train_lm import TrainLmConfig
from levanter.models.gpt2 import Gpt2Config
from levanter.trainer import TrainerConfig
from marin.classifiers.utils import DatasetConfig
from marin.execution.executor import (
    ExecutorMainConfig,
    ExecutorStep,
    executor_main,
    output_path_of,
    this_output_path,
    versioned,
)
from marin.processing.classification.consolidate import ConsolidateConfig, FilterConfig, consolidate
from marin.processing.classification.dedupe import DedupeConfig, dedupe
from marin.processing.classification.fasttext.train_fasttext import (
    TrainFasttextClassifierConfig,
    train,
)
from marin.processing.classification.inference import InferenceConfig, run_inference
from marin.processing.tokenize import lm_data_config
from marin.schemas.web.convert import HtmlToMarkdownConfig
from marin.training.training import TrainLmOnPodConfig, run_levanter_train_lm
from marin.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin.utilities.ray_utils import is_local_ray_cluster
from marin.utils import is_in_ci

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
logger = logging.getLogger(__name__)

TOKENIZER = "./tests/tokenizer"  # Marin: "gpt2" from the hub


def create_steps(prefix: str, synth_data: str) -> list[ExecutorStep]:
    hq_html = ExecutorStep(
        name=os.path.join(prefix, "hq-transformed"),
        fn=html_to_md,
        config=SimpleHtmlToMdConfig(
            input_path=os.path.join(synth_data, "pos"),
            output_path=this_output_path(),
            extract_method=versioned("readability"),
            config=HtmlToMarkdownConfig.default_config(),
        ),
        pip_dependency_groups=["download_transform"],
    )
    lq_html = ExecutorStep(
        name=os.path.join(prefix, "lq-transformed"),
        fn=html_to_md,
        config=SimpleHtmlToMdConfig(
            input_path=os.path.join(synth_data, "neg"),
            output_path=this_output_path(),
            extract_method=versioned("readability"),
            config=HtmlToMarkdownConfig.default_config(),
        ),
        pip_dependency_groups=["download_transform"],
    )

    quality_classifier = ExecutorStep(
        name=os.path.join(prefix, "quality-classifier"),
        fn=train,
        config=TrainFasttextClassifierConfig(
            datasets=[
                DatasetConfig(input_doc_path=output_path_of(hq_html), label="hq", sampling_rate=1.0),
                DatasetConfig(input_doc_path=output_path_of(lq_html), label="lq", sampling_rate=1.0),
            ],
            output_path=this_output_path(),
            fasttext_args={"lr": 0.1, "minCount": 1, "epoch": 25, "wordNgrams": 2, "dim": 50, "thread": 1},
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )

    hq_inference = ExecutorStep(
        name=os.path.join(prefix, "hq-inference"),
        fn=run_inference,
        config=InferenceConfig(
            input_path=output_path_of(hq_html),
            output_path=this_output_path(),
            model_name=output_path_of(quality_classifier),
            model_type="fasttext",
            attribute_name="quickstart-fasttext-quality-hq",
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )
    lq_inference = ExecutorStep(
        name=os.path.join(prefix, "lq-inference"),
        fn=run_inference,
        config=InferenceConfig(
            input_path=output_path_of(lq_html),
            output_path=this_output_path(),
            model_name=output_path_of(quality_classifier),
            model_type="fasttext",
            attribute_name="quickstart-fasttext-quality-lq",
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )

    dedupe_step = ExecutorStep(
        name=os.path.join(prefix, "dedupe"),
        fn=dedupe,
        config=DedupeConfig(input_path=output_path_of(hq_html), output_path=this_output_path()),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )

    consolidate_step = ExecutorStep(
        name=os.path.join(prefix, "consolidate"),
        fn=consolidate,
        config=ConsolidateConfig(
            input_path=output_path_of(hq_html),
            output_path=this_output_path(),
            filters=[
                FilterConfig(
                    type=versioned("classify"),
                    attribute_path=output_path_of(hq_inference),
                    name=versioned("quickstart-fasttext-quality-hq"),
                    label="__label__hq",
                    threshold=versioned(0.1),
                ),
                FilterConfig(
                    type=versioned("remove_spans"),
                    attribute_path=output_path_of(dedupe_step),
                    name=versioned("duplicate_text"),
                ),
            ],
        ),
        pip_dependency_groups=["quality_dedup_consolidate"],
    )

    tokenize_step = default_tokenize(
        name=os.path.join(prefix, "tokenized"),
        dataset=output_path_of(consolidate_step),
        tokenizer=TOKENIZER,
    )

    train_env_vars = {"WANDB_API_KEY": "", "WANDB_MODE": "disabled", "JAX_TRACEBACK_FILTERING": "off"}
    if not is_in_ci() and not is_local_ray_cluster():
        pod_config = ResourceConfig.with_tpu("v4-8")
    else:
        train_env_vars["JAX_PLATFORMS"] = "cpu"
        pod_config = ResourceConfig.with_cpu()

    train_step = ExecutorStep(
        name=os.path.join(prefix, "train"),
        fn=run_levanter_train_lm,
        config=TrainLmOnPodConfig(
            output_path=this_output_path(),
            resources=pod_config,
            env_vars=train_env_vars,
            train_config=TrainLmConfig(
                data=lm_data_config(tokenize_step, permutation_type="linear"),
                hf_save_steps=1,
                model=Gpt2Config(num_layers=2, num_heads=2, seq_len=64, hidden_dim=32),
                trainer=TrainerConfig(
                    train_batch_size=8, num_train_steps=2, max_eval_batches=1, require_accelerator=False
                ),
            ),
        ),
    )

    return [
        hq_html,
        lq_html,
        quality_classifier,
        hq_inference,
        lq_inference,
        dedupe_step,
        consolidate_step,
        tokenize_step,
        train_step,
    ]


@draccus.wrap()
def main(config: ExecutorMainConfig):
    try:
        bucket_prefix = "/tmp"
        experiment_prefix = "quickstart-tests"
        if "--prefix" in sys.argv:
            bucket_prefix = config.prefix
        config = dataclasses.replace(
            config, prefix=bucket_prefix, executor_info_base_path=os.path.join(bucket_prefix, "experiments")
        )
        synth_data = "./tests/quickstart-data"
        steps = create_steps(experiment_prefix, synth_data)
        executor_main(config, steps=steps)
        logger.info(f"Execution completed successfully. All outputs are in {bucket_prefix}/{experiment_prefix}")
    except Exception as e:
        logger.error(f"Error in main execution: {e}")
        raise e


if __name__ == "__main__":
    main()
