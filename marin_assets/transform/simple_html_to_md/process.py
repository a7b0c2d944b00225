"""Stage 2: HTML -> plain text with resiliparse main-content extraction (boilerplate removed).

A :class:`~marin_assets.core.shard_stage.DocumentStage`: output co-sharded with the raw docs
(same shard names). Paragraph breaks are kept as blank lines, which the paragraph-level dedup
relies on. A record whose ``metadata.content_type`` is ``text/plain`` (WET conversions) is
already text and passes through unchanged. A record whose ``text`` is not a string, whose
extraction raises, or that yields no text goes to ``quarantine/<shard>.jsonl`` with the reason
and its line in the input shard. Every other field of a record is passed on as it was
(``metadata`` gains ``html_chars``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from resiliparse.extract.html2text import extract_plain_text

from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine


@dataclass(frozen=True)
class HtmlToTextConfig:
    """Config of the HTML->text stage.

    Attributes:
        input_path: the raw stage's output for this drop (reads its ``docs/`` shards).
        output_path: where ``docs/`` and ``quarantine/`` go.
        main_content: resiliparse's main-content heuristics (drops nav, footers, ads, banners).
        min_chars: extracted text shorter than this is quarantined as ``no_text``.
    """

    input_path: str
    output_path: str
    main_content: bool = True
    min_chars: int = 1


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


class HtmlToTextStage(DocumentStage):
    """Per document: extract the main-content text of the HTML."""

    stage = "text"

    def __init__(self, config: HtmlToTextConfig) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config

    def process(
        self, record: dict[str, Any], state: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        html = record.get("text", "")
        if not isinstance(html, str):
            quarantine.add(
                "extract_error", f"text is {type(html).__name__}, not a string", line=line, doc_id=record.get("id")
            )
            return None
        metadata = record.get("metadata") or {}
        counts = counters.counts  # per record: plain dict updates, no method calls
        counts["html_chars_in"] += len(html)
        content_type = metadata.get("content_type")
        if content_type is not None and str(content_type).startswith("text/plain"):
            text = html.strip()
            counts["plain_text_passthrough"] += 1
        else:
            try:
                text = extract_text(html, self.config.main_content)
            except Exception as exc:  # resiliparse is lenient; anything it still rejects is quarantined
                quarantine.add(
                    "extract_error", f"{type(exc).__name__}: {exc}"[:300], line=line, doc_id=record.get("id")
                )
                return None
        if len(text) < self.config.min_chars:
            quarantine.add(
                "no_text",
                f"{len(text)} characters extracted from {len(html)} characters of HTML",
                line=line,
                doc_id=record.get("id"),
            )
            return None
        counts["text_chars_out"] += len(text)
        out = record.copy()  # same fields, in the same order; only text and metadata change
        out["text"] = text
        out["metadata"] = {**metadata, "html_chars": len(html)}
        return out

    def sample(self, record: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
        return {"id": record["id"], "html_chars": len(record.get("text", "")), "text": out["text"][:200]}

    def summarize(self, results: list) -> dict[str, Any]:
        html = sum(r.counts.get("html_chars_in", 0) for r in results)
        text = sum(r.counts.get("text_chars_out", 0) for r in results)
        return {"kept_char_ratio": round(text / html, 4) if html else 0.0}


def run_html_to_text(config: HtmlToTextConfig) -> dict[str, Any]:
    """Step function of the HTML->text stage; returns materialization metadata."""
    return HtmlToTextStage(config).run()
