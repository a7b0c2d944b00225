"""Stage 5: cleaned documents of a drop -- quality filter + dedup attributes applied.

Reads the text docs and the co-sharded attribute files (same shard names) of the quality and
dedup steps. A document is removed when its quality score is below the threshold, or when it is
a fuzzy duplicate; duplicate paragraphs are cut out of the documents that remain, and a document
with nothing left after that is removed too. Output: ``docs/<shard>.jsonl.gz`` (Dolma).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from marin_assets.curation.io import list_files, map_tasks, read_jsonl_gz, write_jsonl_gz
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import join_path


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
        use_ray: one Ray task per shard.
    """

    input_path: str
    quality_path: str
    dedup_path: str
    output_path: str
    quality_attribute: str = "quality_hq"
    quality_threshold: float = 0.5
    min_chars: int = 1
    use_ray: bool = False


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
    return {rec["id"]: rec["attributes"] for rec in read_jsonl_gz(path)}


def consolidate_shard(
    text_path: str, quality_path: str, dedup_path: str, out_path: str, attribute: str, threshold: float, min_chars: int
) -> dict[str, Any]:
    """Filter one shard (a Ray task); returns counts and samples."""
    quality = _attributes(quality_path)
    dedup = _attributes(dedup_path)
    counts: Counter[str] = Counter()
    out = []
    samples = []
    for rec in read_jsonl_gz(text_path):
        counts["documents_in"] += 1
        counts["chars_in"] += len(rec["text"])
        q = quality.get(rec["id"])
        d = dedup.get(rec["id"])
        if q is None or d is None:
            raise RuntimeError(f"{rec['id']} in {text_path} has no {'quality' if q is None else 'dedup'} attributes")
        if q.get(attribute, 0.0) < threshold:
            counts["removed_by_quality"] += 1
            continue
        if d.get("dedup_fuzzy_duplicate"):
            counts["removed_fuzzy_duplicates"] += 1
            continue
        spans = d.get("dedup_paragraph_spans") or []
        text = remove_spans(rec["text"], spans)
        counts["paragraphs_removed"] += len(spans)
        if len(text) < min_chars:
            counts["removed_empty_after_paragraph_dedup"] += 1
            continue
        if spans and len(samples) < 2:
            samples.append({"id": rec["id"], "before": rec["text"][:160], "after": text[:160]})
        out.append({**rec, "text": text})
        counts["documents_out"] += 1
        counts["chars_out"] += len(text)
    counts["bytes_out"] = write_jsonl_gz(out_path, out)
    return {"counts": dict(counts), "samples": samples}


def run_consolidate(config: ConsolidateConfig) -> dict[str, Any]:
    """Step function of the consolidate stage; returns materialization metadata."""
    start = time.monotonic()
    shards = list_files(join_path(config.input_path, "docs"), ".jsonl.gz")
    args = []
    for s in shards:
        name = s.rsplit("/", 1)[-1]
        args.append(
            (
                s,
                join_path(config.quality_path, f"attributes/{name}"),
                join_path(config.dedup_path, f"attributes/{name}"),
                join_path(config.output_path, f"docs/{name}"),
                config.quality_attribute,
                config.quality_threshold,
                config.min_chars,
            )
        )
    results = map_tasks(consolidate_shard, args, config.use_ray)
    total: Counter[str] = Counter()
    for r in results:
        total.update(r["counts"])
    keys = (
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
    return {
        **{k: int(total.get(k, 0)) for k in keys},
        "quality_threshold": config.quality_threshold,
        "samples_before_after": table_markdown([s for r in results for s in r["samples"]][:3]),
        "seconds": round(time.monotonic() - start, 3),
    }
