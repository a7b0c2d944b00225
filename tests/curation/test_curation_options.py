"""``curation_steps``' parameters, grouped in ``CurationOptions`` (issue 39): the grouped form and the
flat keywords scripts and docs pass build the same steps, with the same hashes."""

from __future__ import annotations

import pytest

from marin_assets.execution.versioning import StepGraph
from marin_assets.experiments.curation_pipeline import (
    KEYWORDS,
    CurationOptions,
    DedupOptions,
    QualityOptions,
    RawOptions,
    curation_options,
    curation_steps,
)


def _hashes(steps) -> dict[str, str]:
    graph = StepGraph(list(steps.values()), "/p", {"web": ["drop-001", "drop-002"]})
    return {node.name: node.hash for node in graph.topological()}


def test_grouped_options_and_flat_keywords_build_the_same_steps():
    grouped = CurationOptions(
        use_ray=False,
        revision=1,
        raw=RawOptions(text_key="body"),
        quality=QualityOptions(threshold=0.3, negative_drops=("drop-001",), epoch=5),
        dedup=DedupOptions(num_perm=64, bands=8),
    )
    flat = dict(
        use_ray=False,
        revision=1,
        text_key="body",
        quality_threshold=0.3,
        classifier_negative_drops=("drop-001",),
        fasttext_epoch=5,
        num_perm=64,
        bands=8,
    )
    assert curation_options(**flat) == grouped
    assert _hashes(curation_steps("landing/web", grouped)) == _hashes(curation_steps("landing/web", **flat))
    # Every option changes the steps it parameterizes: the defaults' hashes differ.
    assert _hashes(curation_steps("landing/web", grouped)) != _hashes(curation_steps("landing/web"))


def test_every_keyword_names_a_field_and_an_unknown_one_is_an_error():
    defaults = CurationOptions()
    for keyword, (group, field) in KEYWORDS.items():
        assert hasattr(getattr(defaults, group) if group else defaults, field), keyword
    with pytest.raises(TypeError, match="fasttext_epochs"):
        curation_steps("landing/web", fasttext_epochs=3)
