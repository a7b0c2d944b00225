"""Marin's ``experiments/datashop/default_configs.py``: the keyword defaults of the datashop steps.

Marin's values where they mean the same here (vLLM engine and sampling settings, ``jsonl.zst`` inputs as DCLM
has, keep the top 10% by ``score``). Two differ, because this project's classifier is fastText, not Marin's
BERT/GTE: ``default_quality_filter_train_config_kwargs`` holds fastText arguments and
``default_inference_config_kwargs`` names ``model_type="fasttext"``.
"""

from marin_assets.processing.classification.inference import RuntimeConfig

default_engine_kwargs = {"tensor_parallel_size": 8, "enforce_eager": False, "max_model_len": 8192}

default_generation_kwargs = {
    "temperature": 0.1,
    "max_tokens": 256,
    # prompt tokens = max model length - new tokens
    "truncate_prompt_tokens": default_engine_kwargs["max_model_len"] - 256,
}

default_medu_config_kwargs = {
    "engine_kwargs": default_engine_kwargs,
    "generation_kwargs": default_generation_kwargs,
    "filetype": "jsonl.zst",
    "output_filetype_override": "jsonl.gz",
}

default_text_generation_config_kwargs = {
    "engine_kwargs": default_engine_kwargs,
    "generation_kwargs": default_generation_kwargs,
    "num_instances": (1, 128),
    "save_templated_prompt": False,
    "prompt_column": "text",
    "filetype": "jsonl.zst",
    "output_filetype_override": "jsonl.gz",
    "generated_text_column_name": "generated_text",
}

default_dataset_output_processor_config_kwargs = {"processor_type": "medu"}

default_quality_filter_train_config_kwargs = {
    "fasttext_args": {"epoch": 25, "wordNgrams": 2, "dim": 64, "thread": 1},
    "val_frac": 0.1,
}

default_inference_config_kwargs = {
    "model_type": "fasttext",
    "runtime": RuntimeConfig(memory_limit_gb=12),
    "filetype": "jsonl.zst",
}

default_consolidate_filter_config_kwargs = {"type": "classify", "label": "score", "keep_fraction": 0.10}

default_consolidate_config_kwargs = {"filetype": "jsonl.zst", "ray_memory_limit_gb": 12}
