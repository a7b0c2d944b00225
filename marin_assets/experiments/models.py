"""Marin's ``experiments/models.py`` names: ``ModelConfig``, ``download_model_step``, ``get_model_local_path``.

``download_model_step(ModelConfig(hf_repo_id, hf_revision))`` is Marin's step
``gcsfuse_mount/models/<repo>--<revision>`` (fixed output path, the revision versioned) whose function,
``download_hf`` with ``hf_repo_type_prefix=""``, fetches the model repository from the hub
(``$HF_ENDPOINT``; the local Hugging Face cache with ``HF_HUB_OFFLINE=1``). Marin's list of models is here
too (``llama_3_1_8b``, ``llama_3_3_70b_instruct``, ``qwen3_8b``, ``marin_8b_base`` ...: same repositories and
revisions, so the same step names and paths); defining them fetches nothing, running one downloads the model
or fails naming it. A team's own ``experiments/models.py`` wins.
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


# Marin's model list (same repositories and revisions as its experiments/models.py).
smollm2_1_7b_instruct = download_model_step(ModelConfig("HuggingFaceTB/SmolLM2-1.7B-Instruct", "450ff1f"))
qwen2_5_7b_instruct = download_model_step(ModelConfig("Qwen/Qwen2.5-7B-Instruct", "a09a354"))
qwen2_5_32b = download_model_step(ModelConfig("Qwen/Qwen2.5-32B", "1818d35"))
qwen2_5_72b_instruct = download_model_step(ModelConfig("Qwen/Qwen2.5-72B-Instruct", "495f393"))
llama_3_3_70b_instruct = download_model_step(ModelConfig("meta-llama/Llama-3.3-70B-Instruct", "6f6073b"))
llama_3_1_8b_instruct = download_model_step(ModelConfig("meta-llama/Llama-3.1-8B-Instruct", "0e9e39f"))
llama_3_1_8b = download_model_step(ModelConfig("meta-llama/Llama-3.1-8B", "d04e592"))
tulu_3_1_8b_sft = download_model_step(ModelConfig("allenai/Llama-3.1-Tulu-3-8B-SFT", "f2a0b46"))
tulu_3_1_8b_instruct = download_model_step(ModelConfig("allenai/Llama-3.1-Tulu-3.1-8B", "46239c2"))
olmo_2_sft_8b = download_model_step(ModelConfig("allenai/OLMo-2-1124-7B-SFT", "1de02c0"))
olmo_2_base_8b = download_model_step(ModelConfig("allenai/OLMo-2-1124-7B", "7df9a82"))
olmo_2_base_32b = download_model_step(ModelConfig("allenai/OLMo-2-0325-32B", "stage2-ingredient2-step9000-tokens76B"))
olmo_3_1025_7b = download_model_step(ModelConfig("allenai/Olmo-3-1025-7B", "18b40a1e895f829c68a132befa20109c41488e62"))
amber_base_7b = download_model_step(ModelConfig("LLM360/Amber", "83c188f"))
map_neo_7b = download_model_step(ModelConfig("m-a-p/neo_7b", "81bad32"))
marin_8b_base = download_model_step(ModelConfig("marin-community/marin-8b-base", "0f1f658"))
llama_3_2_1b = download_model_step(ModelConfig("meta-llama/Llama-3.2-1B", "4e20de3"))
qwen3_0_6b = download_model_step(ModelConfig("Qwen/Qwen3-0.6B", "c1899de"))
qwen3_1_7b = download_model_step(ModelConfig("Qwen/Qwen3-1.7B", "70d244c"))
qwen3_4b = download_model_step(ModelConfig("Qwen/Qwen3-4B", "1cfa9a7"))
qwen3_8b = download_model_step(ModelConfig("Qwen/Qwen3-8B", "b968826"))
qwen3_32b = download_model_step(ModelConfig("Qwen/Qwen3-32B", "9216db5781bf21249d130ec9da846c4624c16137"))
qwen3_0_6b_base = download_model_step(ModelConfig("Qwen/Qwen3-0.6B-Base", "da87bfb"))
qwen3_1_7b_base = download_model_step(ModelConfig("Qwen/Qwen3-1.7B-Base", "ea980cb"))
qwen3_4b_base = download_model_step(ModelConfig("Qwen/Qwen3-4B-Base", "906bfd4"))
qwen3_8b_base = download_model_step(ModelConfig("Qwen/Qwen3-8B-Base", "49e3418"))

MARIN_MODELS = {
    "smollm2_1_7b_instruct": smollm2_1_7b_instruct,
    "qwen2_5_7b_instruct": qwen2_5_7b_instruct,
    "qwen2_5_32b": qwen2_5_32b,
    "qwen2_5_72b_instruct": qwen2_5_72b_instruct,
    "llama_3_3_70b_instruct": llama_3_3_70b_instruct,
    "llama_3_1_8b_instruct": llama_3_1_8b_instruct,
    "llama_3_1_8b": llama_3_1_8b,
    "tulu_3_1_8b_sft": tulu_3_1_8b_sft,
    "tulu_3_1_8b_instruct": tulu_3_1_8b_instruct,
    "olmo_2_sft_8b": olmo_2_sft_8b,
    "olmo_2_base_8b": olmo_2_base_8b,
    "olmo_2_base_32b": olmo_2_base_32b,
    "olmo_3_1025_7b": olmo_3_1025_7b,
    "amber_base_7b": amber_base_7b,
    "map_neo_7b": map_neo_7b,
    "marin_8b_base": marin_8b_base,
    "llama_3_2_1b": llama_3_2_1b,
    "qwen3_0_6b": qwen3_0_6b,
    "qwen3_1_7b": qwen3_1_7b,
    "qwen3_4b": qwen3_4b,
    "qwen3_8b": qwen3_8b,
    "qwen3_32b": qwen3_32b,
    "qwen3_0_6b_base": qwen3_0_6b_base,
    "qwen3_1_7b_base": qwen3_1_7b_base,
    "qwen3_4b_base": qwen3_4b_base,
    "qwen3_8b_base": qwen3_8b_base,
}

__all__ = [
    "GCS_FUSE_MOUNT_PATH",
    "LOCAL_PREFIX",
    "MARIN_MODELS",
    "ModelConfig",
    "download_model_step",
    "get_model_local_path",
    *MARIN_MODELS,
]
