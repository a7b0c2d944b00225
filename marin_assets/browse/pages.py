"""HTML pages of the data browser (server-rendered, no JavaScript; every value escaped)."""

from __future__ import annotations

import difflib
import html
import json
from typing import Any
from urllib.parse import quote, urlencode

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f3f3f3}pre{background:#f8f8f8;padding:.6em;white-space:pre-wrap;max-height:30em;overflow:auto}
.SUCCESS{color:#17702a}.FAILED,.DEP_FAILED,.removed{color:#b3261e}.RUNNING{color:#8a6d00}
.text{max-width:50em;font-size:90%}.attrs{font-size:85%}.muted{color:#777}nav a{margin-right:1em}
.cols{display:flex;gap:1em}.cols>div{flex:1;min-width:0}
"""


def esc(value: Any) -> str:
    """HTML-escaped text of ``value``."""
    return html.escape(str(value), quote=True)


def link(route: str, relative: str, label: str, params: dict[str, Any] | None = None, **attrs: str) -> str:
    """``<a>`` to ``/<route>/<relative>`` with query ``params`` (path components quoted)."""
    href = f"/{route}/{quote(relative, safe='/')}" if relative else f"/{route}/"
    if params:
        href += "?" + urlencode({k: v for k, v in params.items() if v not in (None, "")})
    extra = "".join(f' {k.rstrip("_")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(label)}</a>'


def layout(title: str, body: str, prefix: str) -> str:
    """A whole page."""
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{STYLE}</style></head>"
        f"<body><nav><a href='/'>Experiments</a><a href='/browse/'>Prefix</a>"
        f"<span class='muted'>{esc(prefix)}</span></nav><h1>{esc(title)}</h1>{body}</body></html>"
    )


def table(headers: list[str], rows: list[list[str]], **attrs: str) -> str:
    """A table of already-escaped cells."""
    extra = "".join(f' {k.rstrip("_")}="{esc(v)}"' for k, v in attrs.items())
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{extra}><tr>{head}</tr>{body}</table>"


def breadcrumbs(relative: str) -> str:
    """Links to every folder above ``relative``."""
    parts = [p for p in relative.split("/") if p]
    crumbs = [link("browse", "", "prefix")]
    for i, part in enumerate(parts):
        crumbs.append(link("browse", "/".join(parts[: i + 1]), part))
    return "<p>" + " / ".join(crumbs) + "</p>"


def status_cell(status: str) -> str:
    return f"<span class='status {esc(status)}'>{esc(status)}</span>"


def short_json(value: Any, limit: int = 400) -> str:
    """Compact JSON, cut at ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + " …"


def attrs_cell(attributes: dict[str, Any]) -> str:
    """Attributes as ``name = value`` lines (lists shown by their length)."""
    lines = []
    for key, value in sorted(attributes.items()):
        shown = f"[{len(value)} items]" if isinstance(value, list) else short_json(value, 80)
        lines.append(f"{esc(key)} = {esc(shown)}")
    return "<div class='attrs'>" + "<br>".join(lines) + "</div>"


def text_preview(record: dict[str, Any], chars: int = 240) -> str:
    text = record.get("text")
    if not isinstance(text, str):
        text = short_json({k: v for k, v in record.items() if k != "text"}, chars)
    return esc(text[:chars] + (" …" if len(text) > chars else ""))


def text_diff(before: str, after: str, max_lines: int = 200) -> str:
    """A unified line diff of two texts (cut at ``max_lines``)."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=1))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"… {len(lines) - max_lines} more lines"]
    return "\n".join(lines)
