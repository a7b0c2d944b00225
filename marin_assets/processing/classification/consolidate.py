"""Stage 5, Marin's ``marin.processing.classification.consolidate``: apply attribute filters.

``consolidate(ConsolidateConfig(input_path, output_path, filters=[FilterConfig(...), ...]))`` reads
every ``**/*.<filetype>`` document file below ``input_path`` and, for each filter, the attribute
file at the same relative path below the filter's ``attribute_path`` (what ``run_inference`` and
``dedupe`` write). Filters apply in order:

* ``classify`` -- the value ``attributes[name][label]`` (or ``attributes[name]`` without a label)
  must be ``>= threshold`` (alias ``lower_threshold``, Marin's later name) and ``<= upper_threshold``
  when set; ``reverse`` inverts the decision. ``keep_fraction`` instead of a threshold keeps that
  share of documents: the threshold becomes the ``1 - keep_fraction`` quantile of the values over
  every attribute file of the input.
* ``remove_spans`` -- the ``[start, end, score]`` spans of ``attributes[name]`` are cut out of
  ``text`` (whole lines; blank-line runs collapsed); a document with fewer than ``min_chars``
  characters left is removed.
* ``remove_docs`` -- a document whose ``attributes[name]`` is truthy is removed (our dedup's
  ``fuzzy_duplicate``).

Surviving documents keep every field and go to the same relative path below ``output_path``
(Marin's layout, jsonl.gz), so in the curation pipeline ``docs/<shard>`` stays ``docs/<shard>``.
Unlike Marin (which skips such a filter with a warning), a filter whose attribute file is
missing **fails the step**, naming the filter and the file: publishing every document unfiltered as
SUCCESS would be a wrong output that looks finished. A filter that may legitimately lack attributes
says so explicitly with ``missing_ok=versioned(True)`` (versioned, so the choice is in the step's
hash); it is then skipped for that file with a warning and counted as ``missing_attribute_files``.
A document absent from an existing attribute file is an error naming the document and the file (an
upstream step is broken).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np

from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine, find_shards, read_shard
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import exists, join_path

logger = logging.getLogger(__name__)


class FilterType(StrEnum):
    """Marin's filter kinds (plain strings compare equal: ``type="classify"`` works)."""

    CLASSIFY = "classify"
    REMOVE_SPANS = "remove_spans"
    REMOVE_DOC = "remove_docs"


FILTER_TYPE_CLASSIFY = FilterType.CLASSIFY.value
FILTER_TYPE_REMOVE_SPANS = FilterType.REMOVE_SPANS.value
FILTER_TYPE_REMOVE_DOC = FilterType.REMOVE_DOC.value


@dataclass(frozen=True)
class FilterConfig:
    """One filter (Marin's fields).

    Attributes:
        type: ``classify``, ``remove_spans`` or ``remove_docs``.
        attribute_path: folder of attribute files mirroring the input.
        name: the attribute's key in ``attributes``.
        label: for ``classify``, the key inside the attribute (``"__label__hq"``).
        threshold: keep when the value is ``>=`` this (``lower_threshold`` is the same).
        keep_fraction: keep this share of documents (instead of a threshold).
        upper_threshold: keep when the value is ``<=`` this.
        reverse: invert a ``classify`` decision.
        missing_ok: skip this filter for a document file whose attribute file is missing (a
            warning, counted) instead of failing the step. An explicit opt-in: pass it as
            ``versioned(True)`` so that the output's version says the filter may be skipped.
    """

    type: str
    attribute_path: StepPath
    name: str
    label: str | None = None
    threshold: float | None = None
    keep_fraction: float | None = None
    upper_threshold: float | None = None
    reverse: bool = False
    lower_threshold: float | None = None
    missing_ok: bool = False

    @property
    def lower(self) -> float | None:
        """The lower bound, from ``threshold`` or ``lower_threshold``."""
        return self.threshold if self.threshold is not None else self.lower_threshold


@dataclass(frozen=True)
class ConsolidateConfig:
    """Marin's config of the consolidate step (plus ``min_chars``, ours).

    Attributes:
        input_path: folder of documents (our text stage's output for a drop).
        output_path: where the kept documents go (same relative paths).
        filters: applied in order.
        filetype: extension of the document files.
        max_tasks_in_flight, ray_memory_limit_gb: Marin's scheduling knobs (accepted; shards run
            on the engine's pool).
        min_chars: documents shorter than this after removing spans are dropped.
    """

    input_path: StepPath
    output_path: StepPath
    filters: list[FilterConfig] = field(default_factory=list)
    filetype: str = "jsonl.gz"
    max_tasks_in_flight: int = 1000
    ray_memory_limit_gb: float = 0.5
    min_chars: int = 1


class MissingAttributeError(FileNotFoundError):
    """A filter's attribute file is missing and the filter did not opt in to being skipped."""


def remove_spans(text: str, spans: list[list[float]]) -> str:
    """``text`` without the character spans (whole lines), blank-line runs collapsed."""
    if not spans:
        return text
    parts = []
    pos = 0
    for start, end, *_ in sorted(spans):
        parts.append(text[pos : int(start)])
        pos = max(pos, int(end))
    parts.append(text[pos:])
    lines = "".join(parts).split("\n")
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1].strip()):
            out.append(line)
    return "\n".join(out).strip()


def _value(attributes: dict[str, Any], filt: FilterConfig) -> float:
    value = attributes[filt.name]
    if filt.label is not None:
        value = value[filt.label]
    return float(value)


def _check(filt: FilterConfig) -> None:
    kinds = {t.value for t in FilterType}
    if str(filt.type) not in kinds:
        raise ValueError(f"FilterConfig.type {filt.type!r} of {filt.name!r}: expected one of {sorted(kinds)}")
    if filt.threshold is not None and filt.lower_threshold is not None:
        raise ValueError(f"filter {filt.name!r}: give threshold or lower_threshold, not both")
    if str(filt.type) == FILTER_TYPE_CLASSIFY:
        if filt.lower is None and filt.upper_threshold is None and filt.keep_fraction is None:
            raise ValueError(f"classify filter {filt.name!r} needs threshold, upper_threshold or keep_fraction")
        if filt.keep_fraction is not None and filt.lower is not None:
            raise ValueError(f"classify filter {filt.name!r}: give threshold or keep_fraction, not both")


class ConsolidateStage(DocumentStage):
    """Per document: apply every filter with the attributes of its (mirrored) attribute files."""

    stage = "consolidated"
    mirror = True
    output_dirs = ()

    def __init__(self, config: ConsolidateConfig) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config

    def shards(self) -> list[str]:
        return find_shards(self.input_path, f".{self.config.filetype}")

    def attribute_file(self, shard: str, filt: FilterConfig) -> str:
        """The attribute file of ``shard`` for ``filt`` (same relative path)."""
        return join_path(filt.attribute_path, self.relative_path(shard))

    def open_shard(self, shard: str) -> Any:
        tables: list[tuple[FilterConfig, dict[str, Any] | None, str]] = []
        for filt in self.config.filters:
            path = self.attribute_file(shard, filt)
            if not exists(path):
                if not filt.missing_ok:
                    raise MissingAttributeError(
                        f"no attribute file {path} for filter {filt.name!r} ({filt.type}) of {shard}: the filter "
                        "cannot run, and publishing the documents unfiltered would be a wrong output; materialize "
                        f"the step writing {filt.attribute_path}, or opt in with FilterConfig(missing_ok=versioned(True))"
                    )
                logger.warning("no attribute file %s for filter %r: filter skipped for %s", path, filt.name, shard)
                tables.append((filt, None, path))
                continue
            tables.append((filt, {rec["id"]: rec["attributes"] for rec in read_shard(path)}, path))
        return shard, tables

    def process(
        self, record: dict[str, Any], state: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        _, tables = state
        text = record["text"]
        counters.add("chars_in", len(text))
        for filt, table, path in tables:
            if table is None:
                continue
            attributes = table.get(record["id"])
            if attributes is None:
                raise RuntimeError(f"document {record['id']} has no attributes in {path} (filter {filt.name!r})")
            kind = str(filt.type)
            if kind == FILTER_TYPE_CLASSIFY:
                value = _value(attributes, filt)
                keep = (filt.lower is None or value >= filt.lower) and (
                    filt.upper_threshold is None or value <= filt.upper_threshold
                )
                if keep == filt.reverse:
                    counters.add(f"removed_by_{filt.name}")
                    return None
            elif kind == FILTER_TYPE_REMOVE_DOC:
                if attributes.get(filt.name):
                    counters.add(f"removed_by_{filt.name}")
                    return None
            else:
                spans = attributes.get(filt.name) or []
                if spans:
                    text = remove_spans(text, spans)
                    counters.add(f"spans_removed_{filt.name}", len(spans))
                    if len(text) < self.config.min_chars:
                        counters.add("removed_empty_after_span_removal")
                        return None
        counters.add("chars_out", len(text))
        return {**record, "text": text} if text is not record["text"] else record

    def sample(self, record: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
        if out["text"] == record["text"]:
            return None
        return {"id": record["id"], "before": record["text"][:160], "after": out["text"][:160]}

    def summarize(self, results: list) -> dict[str, Any]:
        totals: dict[str, int] = {}
        for r in results:
            for key, value in r.counts.items():
                if key.startswith(("removed_", "spans_removed_", "chars_")):
                    totals[key] = totals.get(key, 0) + value
        missing = sum(
            1
            for shard in (r.shard for r in results)
            for filt in self.config.filters
            if not exists(self.attribute_file(shard, filt))
        )
        return {**dict(sorted(totals.items())), "missing_attribute_files": missing}


def _resolve_keep_fractions(config: ConsolidateConfig, stage: ConsolidateStage) -> ConsolidateConfig:
    """Turn each ``keep_fraction`` into the threshold that keeps that share of the input's documents."""
    filters = []
    for filt in config.filters:
        if str(filt.type) == FILTER_TYPE_CLASSIFY and filt.keep_fraction is not None:
            values = [
                _value(rec["attributes"], filt)
                for shard in stage.shards()
                if exists(path := stage.attribute_file(shard, filt))
                for rec in read_shard(path)
            ]
            if not values:
                raise FileNotFoundError(f"no attributes of {filt.name!r} below {filt.attribute_path} for keep_fraction")
            cut = float(np.quantile(np.array(values), 1 - filt.keep_fraction))
            filt = replace(filt, keep_fraction=None, threshold=cut)
        filters.append(filt)
    return replace(config, filters=filters)


def consolidate(config: ConsolidateConfig) -> dict[str, Any]:
    """Step function (Marin's name): filter the documents; returns materialization metadata.

    Raises:
        ValueError: a filter of an unknown type or without bounds.
        MissingAttributeError: a filter's attribute file is missing (without ``missing_ok``).
    """
    for filt in config.filters:
        _check(filt)
    resolved = _resolve_keep_fractions(config, ConsolidateStage(config))
    meta = ConsolidateStage(resolved).run()
    if "samples" in meta:
        meta["samples_before_after"] = meta.pop("samples")
    meta["filters"] = table_markdown(
        [
            {"type": str(f.type), "name": f.name, "label": f.label, "threshold": f.lower, "upper": f.upper_threshold}
            for f in resolved.filters
        ]
    )
    return meta
