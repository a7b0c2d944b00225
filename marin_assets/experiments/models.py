"""Marin's ``experiments/models.py`` names: ``ModelConfig``, ``download_model_step``, ``get_model_local_path``.

``download_model_step(ModelConfig(hf_repo_id, hf_revision))`` is Marin's step
``gcsfuse_mount/models/<repo>--<revision>`` (fixed output path, the revision versioned) whose function,
``download_hf`` with ``hf_repo_type_prefix=""``, fetches the model repository from the hub
(``$HF_ENDPOINT``; the local Hugging Face cache with ``HF_HUB_OFFLINE=1``). Marin's list of models
(``llama_3_1_8b`` ...) is not built in: a team keeps its own ``experiments/models.py`` (which wins) or
defines steps with these functions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from marin_assets.download.huggingface.download_hf import DownloadConfig, download_hf
from marin_assets.execution.step import ExecutorStep, this_output_path, versioned
from marin_assets.utils import get_directory_friendly_name

# Marin mounts its bucket here on TPU hosts (GCSFuse); the step's output path is relative to the prefix.
LOCAL_PREFIX = "/opt"
GCS_FUSE_MOUNT_PATH = "gcsfuse_mount/models"


@dataclass(frozen=True)
class ModelConfig:
    """A model repository on the hub and its revision (Marin's fields)."""

    hf_repo_id: str
    hf_revision: str


def download_model_step(model_config: ModelConfig) -> ExecutorStep:
    """Marin's: the step downloading ``hf_repo_id@hf_revision`` to ``gcsfuse_mount/models/<repo>--<rev>``."""
    model_name = get_directory_friendly_name(model_config.hf_repo_id)
    model_revision = get_directory_friendly_name(model_config.hf_revision)
    path = f"{GCS_FUSE_MOUNT_PATH}/{model_name}--{model_revision}"
    return ExecutorStep(
        name=path,
        fn=download_hf,
        config=DownloadConfig(
            hf_dataset_id=model_config.hf_repo_id,
            revision=versioned(model_config.hf_revision),
            gcs_output_path=this_output_path(),
            wait_for_completion=True,
            hf_repo_type_prefix="",
        ),
        override_output_path=path,
    )


def get_model_local_path(step: ExecutorStep) -> str:
    """Where Marin's TPU hosts see the model (``/opt/gcsfuse_mount/models/<repo>--<rev>``)."""
    return os.path.join(LOCAL_PREFIX, GCS_FUSE_MOUNT_PATH, step.name[len(GCS_FUSE_MOUNT_PATH) + 1 :])


__all__ = ["GCS_FUSE_MOUNT_PATH", "LOCAL_PREFIX", "ModelConfig", "download_model_step", "get_model_local_path"]
