"""Stage 5: cleaned documents of a drop -- quality filter + dedup attributes applied.

Reads the text docs and the co-sharded attribute files (same shard names) of the quality and
dedup steps. A document is removed when its quality score is below the threshold, or when it is
a fuzzy duplicate; duplicate paragraphs are cut out of the documents that remain, and a document
with nothing left after that is removed too. Output: ``docs/<shard>.jsonl.gz`` (Dolma).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine, read_shard
from marin_assets.execution.storage import join_path

_COUNTS = (
    "documents_in",
    "documents_out",
    "removed_by_quality",
    "removed_fuzzy_duplicates",
    "paragraphs_removed",
    "removed_empty_after_paragraph_dedup",
    "chars_in",
    "chars_out",
    "bytes_out",
)


@dataclass(frozen=True)
class ConsolidateConfig:
    """Config of the consolidate stage.

    Attributes:
        input_path: the text stage's output for this drop.
        quality_path: the quality attributes step's output for this drop.
        dedup_path: the dedup step's output for this drop.
        output_path: where ``docs/`` goes.
        quality_attribute, quality_threshold: keep documents whose score is ``>=`` the threshold.
        min_chars: documents shorter than this after removing duplicate paragraphs are dropped.
    """

    input_path: str
    quality_path: str
    dedup_path: str
    output_path: str
    quality_attribute: str = "quality_hq"
    quality_threshold: float = 0.5
    min_chars: int = 1


def remove_spans(text: str, spans: list[list[float]]) -> str:
    """``text`` without the character spans (whole lines), blank-line runs collapsed."""
    if not spans:
        return text
    parts = []
    pos = 0
    for start, end, *_ in sorted(spans):
        parts.append(text[pos : int(start)])
        pos = int(end)
    parts.append(text[pos:])
    lines = "".join(parts).split("\n")
    out: list[str] = []
    for line in lines:
        if line.strip() or (out and out[-1].strip()):
            out.append(line)
    return "\n".join(out).strip()


def _attributes(path: str) -> dict[str, dict[str, Any]]:
    return {rec["id"]: rec["attributes"] for rec in read_shard(path)}


class ConsolidateStage(DocumentStage):
    """Per document: apply the quality score and dedup attributes of its (co-sharded) shard."""

    stage = "consolidated"

    def __init__(self, config: ConsolidateConfig) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config

    def open_shard(self, shard: str) -> Any:
        name = shard.rsplit("/", 1)[-1]
        return (
            shard,
            _attributes(join_path(self.config.quality_path, f"attributes/{name}")),
            _attributes(join_path(self.config.dedup_path, f"attributes/{name}")),
        )

    def process(
        self, record: dict[str, Any], state: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        shard, quality, dedup = state
        counters.add("chars_in", len(record["text"]))
        q = quality.get(record["id"])
        d = dedup.get(record["id"])
        if q is None or d is None:
            # Attributes are co-sharded by construction: a gap means an upstream step is broken.
            raise RuntimeError(f"{record['id']} in {shard} has no {'quality' if q is None else 'dedup'} attributes")
        if q.get(self.config.quality_attribute, 0.0) < self.config.quality_threshold:
            counters.add("removed_by_quality")
            return None
        if d.get("dedup_fuzzy_duplicate"):
            counters.add("removed_fuzzy_duplicates")
            return None
        spans = d.get("dedup_paragraph_spans") or []
        text = remove_spans(record["text"], spans)
        counters.add("paragraphs_removed", len(spans))
        if len(text) < self.config.min_chars:
            counters.add("removed_empty_after_paragraph_dedup")
            return None
        counters.add("chars_out", len(text))
        return {**record, "text": text}

    def sample(self, record: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
        if out["text"] == record["text"]:
            return None
        return {"id": record["id"], "before": record["text"][:160], "after": out["text"][:160]}

    def summarize(self, results: list) -> dict[str, Any]:
        totals = {k: sum(r.counts.get(k, 0) for r in results) for k in _COUNTS}
        return {**totals, "quality_threshold": self.config.quality_threshold}


def run_consolidate(config: ConsolidateConfig) -> dict[str, Any]:
    """Step function of the consolidate stage; returns materialization metadata."""
    meta = ConsolidateStage(config).run()
    if "samples" in meta:
        meta["samples_before_after"] = meta.pop("samples")
    return meta
