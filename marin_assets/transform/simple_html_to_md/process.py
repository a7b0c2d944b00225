"""Stage 2, Marin's ``marin.transform.simple_html_to_md.process``: HTML -> text or markdown.

``html_to_md(SimpleHtmlToMdConfig(input_path, output_path, extract_method, config))`` converts every
record of every ``**/*.jsonl.gz`` below ``input_path`` with :func:`marin_assets.web.convert.convert_page`
(its ``content``, through :func:`~marin_assets.web.convert.text_extractor`, resolved once per stage)
and writes it to the same relative path below ``output_path`` (Marin's layout; our raw stage's
``docs/<shard>`` becomes ``docs/<shard>``). The page URL is ``metadata.fineweb_metadata.url`` (Marin)
or ``metadata.url``. The curation pipeline uses ``extract_method="resiliparse"`` with
``ResiliparseConfig(preserve_formatting=True)``: main-content plain text, paragraph breaks kept as
blank lines, which the paragraph-level dedup relies on.

A :class:`~marin_assets.core.shard_stage.DocumentStage`. A record whose ``metadata.content_type``
is ``text/plain`` (WET conversions) is already text and passes through unchanged. Where Marin writes
a record with an ``error`` field instead of ``text``, a record whose ``text`` is not a string, whose
conversion raises, or that yields fewer than ``min_chars`` characters goes to
``quarantine/<shard>.jsonl`` with the reason and its line in the input shard. Every other field of
a record is passed on as it was; ``format`` becomes ``"md"`` (as in Marin) and ``metadata`` gains
``html_chars``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from marin_assets.core.shard_stage import Counters, DocumentStage, Quarantine
from marin_assets.execution.step import StepPath
from marin_assets.schemas.web.convert import ExtractionConfig, HtmlToMarkdownConfig
from marin_assets.web.convert import text_extractor


@dataclass(frozen=True)
class SimpleHtmlToMdConfig:
    """Marin's config of the HTML -> markdown transform.

    Attributes:
        input_path: folder of ``.jsonl.gz`` documents whose ``text`` is HTML (any depth).
        output_path: where the converted documents (same relative paths) and ``quarantine/`` go.
        extract_method: ``"readability"`` (Marin's default), ``"resiliparse"`` or ``"trafilatura"``.
        config: the method's options (:mod:`marin_assets.schemas.web.convert`).
        min_chars: ours -- converted text shorter than this is quarantined as ``no_text``.
    """

    input_path: StepPath
    output_path: StepPath
    extract_method: str = "readability"
    config: ExtractionConfig = field(default_factory=HtmlToMarkdownConfig.default_config)
    min_chars: int = 1


def _url(metadata: dict[str, Any]) -> str | None:
    fineweb = metadata.get("fineweb_metadata")
    url = fineweb.get("url") if isinstance(fineweb, dict) else None
    url = url or metadata.get("url")
    return url if isinstance(url, str) and url else None


class SimpleHtmlToMdStage(DocumentStage):
    """Per document: ``convert_page(html, url, extract_method, config)["content"]``."""

    stage = "text"
    mirror = True

    def __init__(self, config: SimpleHtmlToMdConfig) -> None:
        super().__init__(config.input_path, config.output_path)
        self.config = config
        # convert_page(...)["content"], resolved once (resiliparse: one extract_plain_text call a
        # page). An unknown method, a config of the wrong kind or a missing package fails the step
        # here, once, instead of quarantining every record.
        self._extract = text_extractor(config.extract_method, config.config)

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
                text = self._extract(html, _url(metadata)).strip()
            except Exception as exc:  # noqa: BLE001 - resiliparse is lenient; what it still rejects is one page's problem, quarantined and counted
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
        out = record.copy()  # same fields, in the same order; only text, format and metadata change
        out["text"] = text
        out["format"] = "md"
        out["metadata"] = {**metadata, "html_chars": len(html)}
        return out

    def sample(self, record: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
        return {"id": record["id"], "html_chars": len(record.get("text", "")), "text": out["text"][:200]}

    def summarize(self, results: list) -> dict[str, Any]:
        html = sum(r.counts.get("html_chars_in", 0) for r in results)
        text = sum(r.counts.get("text_chars_out", 0) for r in results)
        return {"kept_char_ratio": round(text / html, 4) if html else 0.0}


def html_to_md(cfg: SimpleHtmlToMdConfig) -> dict[str, Any]:
    """Step function (Marin's name): convert every document; returns materialization metadata."""
    return SimpleHtmlToMdStage(cfg).run()
