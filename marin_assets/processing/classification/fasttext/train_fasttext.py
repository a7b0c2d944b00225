"""Marin's ``marin.processing.classification.fasttext.train_fasttext``: the classifier training step.

``train(TrainFasttextClassifierConfig(datasets=[DatasetConfig(path, "hq"), DatasetConfig(path, "lq")],
output_path=..., fasttext_args={...}))`` labels every document of each dataset with its label
(:func:`marin_assets.classifiers.utils.labelled_documents`) and trains one fastText model on all of
them (:func:`marin_assets.classifiers.fasttext.training.train_model`). The model is
``<output_path>/model.bin``; its labels are ``__label__<label>``; ``report.json`` holds the held-out
accuracy that the curation pipeline's asset check floors.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from marin_assets.classifiers.fasttext.training import train_model
from marin_assets.classifiers.utils import DatasetConfig, labelled_documents
from marin_assets.execution.step import StepPath


@dataclass
class TrainFasttextClassifierConfig:
    """Marin's config of the fastText training step.

    Attributes:
        output_path: where ``model.bin``, ``data.train``, ``data.val`` and ``report.json`` go.
        datasets: the labelled document folders.
        fasttext_args: keyword arguments of ``fasttext.train_supervised`` (``lr``, ``epoch``,
            ``wordNgrams``, ``dim``, ``minCount``, ``bucket``, ``thread``, ...).
        seed: seed of the sampling and of the train/held-out split.
        val_frac: share of the documents held out to measure accuracy.
        memory: GB of memory Marin requests for the training worker (accepted; the step runs where
            the engine puts it).
    """

    output_path: StepPath | None = field(default=None)
    datasets: list[DatasetConfig] = field(default_factory=list)
    fasttext_args: dict = field(default_factory=dict)
    seed: int = 0
    val_frac: float = 0.1
    memory: int = 1


def train(cfg: TrainFasttextClassifierConfig) -> dict[str, Any]:
    """Step function (Marin's name): train the classifier; returns materialization metadata.

    Raises:
        ValueError: no ``output_path`` or no ``datasets``.
    """
    if not cfg.output_path:
        raise ValueError("TrainFasttextClassifierConfig.output_path is required")
    if not cfg.datasets:
        raise ValueError("TrainFasttextClassifierConfig.datasets is empty: nothing to train on")
    examples = itertools.chain.from_iterable(labelled_documents(d, cfg.seed) for d in cfg.datasets)
    return train_model(examples, cfg.output_path, seed=cfg.seed, val_frac=cfg.val_frac, **cfg.fasttext_args)
