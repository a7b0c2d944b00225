"""Stage 2: HTML -> plain text with resiliparse main-content extraction (boilerplate removed).

One task per raw shard, output co-sharded (same shard names). Paragraph breaks are kept as blank
lines, which the paragraph-level dedup relies on. A record whose extraction raises, or yields no
text, goes to ``quarantine/<shard>.jsonl`` with the reason.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from resiliparse.extract.html2text import extract_plain_text

from marin_assets.curation.io import list_files, map_tasks, read_jsonl_gz, write_jsonl, write_jsonl_gz
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import filesystem, join_path


@dataclass(frozen=True)
class HtmlToTextConfig:
    """Config of the HTML->text stage.

    Attributes:
        input_path: the raw stage's output for this drop (reads ``docs/*.jsonl.gz``).
        output_path: where ``docs/`` and ``quarantine/`` go.
        main_content: resiliparse's main-content heuristics (drops nav, footers, ads, banners).
        min_chars: extracted text shorter than this is quarantined as ``no_text``.
        use_ray: one Ray task per shard.
    """

    input_path: str
    output_path: str
    main_content: bool = True
    min_chars: int = 1
    use_ray: bool = False


def extract_text(html: str, main_content: bool = True) -> str:
    """Main-content plain text of ``html`` with blank lines between blocks."""
    text = extract_plain_text(
        html,
        preserve_formatting=True,
        main_content=main_content,
        list_bullets=True,
        alt_texts=False,
        links=False,
        form_fields=False,
        noscript=False,
    )
    return text.strip()


def convert_shard(
    in_path: str, out_path: str, quarantine_path: str, main_content: bool, min_chars: int
) -> dict[str, Any]:
    """Convert one shard (a Ray task); returns its counts."""
    out: list[dict[str, Any]] = []
    quarantined: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    bytes_in = 0
    chars_out = 0
    samples: list[dict[str, Any]] = []
    for line, rec in enumerate(read_jsonl_gz(in_path), start=1):
        html = rec.get("text", "")
        bytes_in += len(html)
        try:
            text = extract_text(html, main_content)
        except Exception as exc:  # resiliparse is lenient; anything it still rejects is quarantined
            reasons["extract_error"] += 1
            quarantined.append(
                {
                    "id": rec.get("id"),
                    "file": in_path,
                    "line": line,
                    "reason": "extract_error",
                    "detail": f"{type(exc).__name__}: {exc}"[:300],
                }
            )
            continue
        if len(text) < min_chars:
            reasons["no_text"] += 1
            quarantined.append(
                {
                    "id": rec.get("id"),
                    "file": in_path,
                    "line": line,
                    "reason": "no_text",
                    "detail": f"{len(text)} characters extracted from {len(html)} bytes of HTML",
                }
            )
            continue
        chars_out += len(text)
        metadata = {**rec.get("metadata", {}), "html_chars": len(html)}
        new = {**rec, "text": text, "metadata": metadata}
        out.append(new)
        if len(samples) < 2:
            samples.append({"id": rec["id"], "html_chars": len(html), "text": text[:200]})
    bytes_out = write_jsonl_gz(out_path, out)
    if quarantined:
        write_jsonl(quarantine_path, quarantined)
    return {
        "documents_in": len(out) + len(quarantined),
        "documents_out": len(out),
        "html_chars_in": bytes_in,
        "text_chars_out": chars_out,
        "bytes_out": bytes_out,
        "quarantined": len(quarantined),
        "quarantine_reasons": dict(reasons),
        "samples": samples,
    }


def run_html_to_text(config: HtmlToTextConfig) -> dict[str, Any]:
    """Step function of the HTML->text stage; returns materialization metadata."""
    start = time.monotonic()
    shards = list_files(join_path(config.input_path, "docs"), ".jsonl.gz")
    fs, p = filesystem(join_path(config.output_path, "quarantine"))
    if fs.exists(p):
        fs.rm(p, recursive=True)  # stale quarantine of an earlier crashed attempt
    args = []
    for shard in shards:
        name = shard.rsplit("/", 1)[-1]
        stem = name[: -len(".jsonl.gz")]
        args.append(
            (
                shard,
                join_path(config.output_path, f"docs/{name}"),
                join_path(config.output_path, f"quarantine/{stem}.jsonl"),
                config.main_content,
                config.min_chars,
            )
        )
    results = map_tasks(convert_shard, args, config.use_ray)
    reasons: Counter[str] = Counter()
    for r in results:
        reasons.update(r["quarantine_reasons"])
    docs_in = sum(r["documents_in"] for r in results)
    docs_out = sum(r["documents_out"] for r in results)
    html_chars = sum(r["html_chars_in"] for r in results)
    text_chars = sum(r["text_chars_out"] for r in results)
    samples = [s for r in results for s in r["samples"]][:3]
    return {
        "documents_in": docs_in,
        "documents_out": docs_out,
        "quarantined": sum(reasons.values()),
        "quarantine_reasons": dict(sorted(reasons.items())),
        "html_chars_in": html_chars,
        "text_chars_out": text_chars,
        "kept_char_ratio": round(text_chars / html_chars, 4) if html_chars else 0.0,
        "bytes_out": sum(r["bytes_out"] for r in results),
        "shards": len(shards),
        "seconds": round(time.monotonic() - start, 3),
        "samples": table_markdown(samples),
    }
