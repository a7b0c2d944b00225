"""Marin's ``marin.processing.classification.config.inference_config``: the configs of the inference
step, as Marin's scripts import them (``InferenceConfig``, ``RuntimeConfig``, ``TaskConfig``,
``DatasetSchemaConfig``). They are the classes :func:`marin_assets.processing.classification.inference.run_inference`
takes -- one definition, imported under both of Marin's module names."""

from marin_assets.core.runtime import TaskConfig
from marin_assets.processing.classification.inference import DatasetSchemaConfig, InferenceConfig, RuntimeConfig

__all__ = ["DatasetSchemaConfig", "InferenceConfig", "RuntimeConfig", "TaskConfig"]
