"""Models downloaded from Hugging Face: download_model_step(MODEL_CONFIG) -> a step."""

import os
from dataclasses import dataclass

from marin.download.huggingface.download_hf import DownloadConfig, download_hf
from marin.execution.executor import ExecutorStep, this_output_path, versioned
from marin.utils import get_directory_friendly_name


@dataclass(frozen=True)
class ModelConfig:
    hf_repo_id: str
    hf_revision: str


LOCAL_PREFIX = "/opt"
GCS_FUSE_MOUNT_PATH = "gcsfuse_mount/models"


def download_model_step(model_config: ModelConfig) -> ExecutorStep:
    model_name = get_directory_friendly_name(model_config.hf_repo_id)
    model_revision = get_directory_friendly_name(model_config.hf_revision)
    return ExecutorStep(
        name=f"{GCS_FUSE_MOUNT_PATH}/{model_name}--{model_revision}",
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=model_config.hf_repo_id,
            revision=versioned(model_config.hf_revision),
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
            hf_repo_type_prefix="",
        ),
        override_output_path=f"{GCS_FUSE_MOUNT_PATH}/{model_name}--{model_revision}",
    )


def get_model_local_path(step: ExecutorStep) -> str:
    model_repo_name = step.name[len(GCS_FUSE_MOUNT_PATH) + 1 :]
    return os.path.join(LOCAL_PREFIX, GCS_FUSE_MOUNT_PATH, model_repo_name)


llama_3_1_8b = download_model_step(ModelConfig(hf_repo_id="meta-llama/Llama-3.1-8B", hf_revision="d04e592"))
qwen3_0_6b = download_model_step(ModelConfig(hf_repo_id="Qwen/Qwen3-0.6B", hf_revision="c1899de"))
