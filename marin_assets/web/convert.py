"""Marin's ``marin.web.convert``: ``convert_page(html, url, extract_method, config)``.

The HTML -> text engine of the curation pipeline (``transform.simple_html_to_md``) and of the
quality classifier's reference set. resiliparse does the work for every method; this machine has
no readability-lxml / markdownify, so the methods map as follows:

* ``"resiliparse"`` (:class:`ResiliparseConfig`) -- as in Marin: ``extract_plain_text(html,
  **config.resiliparse_kwargs)``; the title is prepended when ``prepend_title``; with
  ``use_custom_variant`` the main content is rendered as markdown (``# title`` first).
* ``"readability"`` (:class:`HtmlToMarkdownConfig`, Marin's default) -- main content found by
  resiliparse's main-content heuristics (where Marin uses readability-lxml), rendered as markdown
  with the config's options: ATX headings, ``*`` bullets, numbered lists, fenced ``pre`` blocks,
  ``[text](absolute url)`` links when ``include_links``, image alt texts when ``include_images``;
  content is ``# {title}\\n\\n{markdown}`` when the page has a title.
* ``"trafilatura"`` (:class:`TrafilaturaConfig`) -- ``trafilatura.extract(html, **asdict(config))``
  when trafilatura is installed, else an ImportError naming the package.

Returns Marin's dict: ``{"title", "content", "html"}`` plus ``"url"`` when one is given.
:func:`text_extractor` gives a stage the cheapest function that returns the same ``content``
(the resiliparse method without ``prepend_title`` / ``use_custom_variant`` is one
``extract_plain_text`` call: no title lookup, no dict).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

from marin_assets.schemas.web.convert import (
    ExtractionConfig,
    HtmlToMarkdownConfig,
    ResiliparseConfig,
    TrafilaturaConfig,
)

HTML_CORRECTION_PREFIX = "<!DOCTYPE html>"
EXTRACT_METHODS = ("readability", "resiliparse", "trafilatura")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _title(tree: HTMLTree) -> str | None:
    title = (tree.title or "").strip()
    return title or None


def _inline(el: Any, config: HtmlToMarkdownConfig, url: str | None) -> str:
    """Markdown of the inline content of ``el`` (text, links, breaks)."""
    parts = [el.text or ""]
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        inner = _inline(child, config, url)
        if tag == "a" and config.include_links and child.get("href"):
            href = urljoin(url, child.get("href")) if url else child.get("href")
            parts.append(f"[{inner}]({href})")
        elif tag == "br":
            parts.append("  \n")
        else:
            parts.append(inner)
        # resiliparse puts a newline after <br>; the break above already is one.
        parts.append((child.tail or "").lstrip("\n") if tag == "br" else child.tail or "")
    return "".join(parts)


def _block(el: Any, config: HtmlToMarkdownConfig, url: str | None, out: list[str]) -> None:
    """Append the markdown blocks of ``el``'s children to ``out``."""
    if el.text and el.text.strip():
        out.append(el.text.strip())
    for child in el:
        tag = child.tag if isinstance(child.tag, str) else ""
        if re.fullmatch(r"h[1-6]", tag):
            out.append("#" * int(tag[1]) + " " + _inline(child, config, url).strip())
        elif tag in ("ul", "ol"):
            items = [li for li in child if li.tag == "li"]
            lines = [
                f"{'*' if tag == 'ul' else f'{i}.'} {_inline(li, config, url).strip()}"
                for i, li in enumerate(items, start=1)
            ]
            out.append("\n".join(lines))
        elif tag == "pre":
            out.append(f"```\n{child.text_content().rstrip()}\n```")
        elif tag in ("p", "div", "blockquote"):
            text = _inline(child, config, url).strip()
            if text:
                out.append("> " + text.replace("\n", "\n> ") if tag == "blockquote" else text)
        elif tag:
            text = _inline(child, config, url).strip()
            if text:
                out.append(text)
        if child.tail and child.tail.strip() and (config.include_images or not tag):
            out.append(child.tail.strip())


def html_to_markdown(tree: HTMLTree, config: HtmlToMarkdownConfig, url: str | None) -> tuple[str, str]:
    """(markdown, minimal HTML) of the main content of ``tree``."""
    import lxml.html

    minimal = extract_plain_text(
        tree,
        preserve_formatting="minimal_html",
        main_content=True,
        links=config.include_links,
        alt_texts=config.include_images,
        list_bullets=True,
    )
    if not minimal.strip():
        return "", minimal
    root = lxml.html.fragment_fromstring(minimal, create_parent="div")
    blocks: list[str] = []
    _block(root, config, url, blocks)
    return _BLANK_RUNS.sub("\n\n", "\n\n".join(b for b in blocks if b)).strip(), minimal


def convert_page_with_resiliparse(html: str, url: str | None, config: ResiliparseConfig) -> dict[str, Any]:
    """Marin's resiliparse method (plain text; markdown with ``use_custom_variant``)."""
    tree = HTMLTree.parse(html)
    title = _title(tree)
    if config.use_custom_variant:
        markdown, minimal = html_to_markdown(tree, config.markdownify_config, url)
        content = f"# {title}\n\n{markdown}" if title else markdown
        return {"title": title, "content": content, "html": minimal}
    content = extract_plain_text(tree, **config.resiliparse_kwargs)
    if config.prepend_title and title:
        content = f"{title}\n\n{content}"
    return {"title": title, "content": content, "html": html}


def convert_page_with_readability(html: str, url: str | None, config: HtmlToMarkdownConfig) -> dict[str, Any]:
    """Marin's default method: the page's main content as markdown, ``# title`` first."""
    tree = HTMLTree.parse(html)
    title = _title(tree)
    markdown, minimal = html_to_markdown(tree, config, url)
    content = f"# {title}\n\n{markdown}" if title else markdown
    return {"title": title, "content": content, "html": minimal}


def convert_page_with_trafilatura(html: str, url: str | None, config: TrafilaturaConfig) -> dict[str, Any]:
    """Marin's trafilatura method (needs the trafilatura package)."""
    try:
        import trafilatura
    except ImportError as exc:
        raise ImportError(
            "extract_method='trafilatura' needs the trafilatura package (and lxml_html_clean), which is not "
            "installed; use extract_method='resiliparse' or 'readability'"
        ) from exc
    content = trafilatura.extract(html, **dataclasses.asdict(config))
    if not content:
        content = trafilatura.extract(HTML_CORRECTION_PREFIX + html, **dataclasses.asdict(config)) or ""
    title = _title(HTMLTree.parse(html))
    return {"title": title, "content": f"{title}\n\n{content}" if title else content, "html": html}


def convert_page(
    html: str,
    url: str | None = None,
    extract_method: str = "readability",
    config: ExtractionConfig = HtmlToMarkdownConfig.default_config(),  # noqa: B008 - Marin's default, frozen
) -> dict[str, Any]:
    """Convert one HTML page to text with ``extract_method`` (see the module docstring).

    Raises:
        ValueError: an unknown ``extract_method``, or a ``config`` of the wrong kind for it.
    """
    if extract_method == "readability":
        if isinstance(config, ResiliparseConfig):
            config = config.markdownify_config
        if not isinstance(config, HtmlToMarkdownConfig):
            raise ValueError(f"extract_method='readability' takes an HtmlToMarkdownConfig, got {type(config).__name__}")
        out = convert_page_with_readability(html, url, config)
    elif extract_method == "resiliparse":
        if not isinstance(config, ResiliparseConfig):
            raise ValueError(f"extract_method='resiliparse' takes a ResiliparseConfig, got {type(config).__name__}")
        out = convert_page_with_resiliparse(html, url, config)
    elif extract_method == "trafilatura":
        if not isinstance(config, TrafilaturaConfig):
            raise ValueError(f"extract_method='trafilatura' takes a TrafilaturaConfig, got {type(config).__name__}")
        out = convert_page_with_trafilatura(html, url, config)
    else:
        raise ValueError(f"Invalid extract_method: {extract_method!r} (one of {', '.join(EXTRACT_METHODS)})")
    if url:
        out["url"] = url
    return out


@dataclasses.dataclass(frozen=True)
class _PlainText:
    """``extract_plain_text(html, **kwargs)`` (picklable: stages ship to worker processes)."""

    kwargs: dict[str, Any]

    def __call__(self, html: str, url: str | None = None) -> str:
        return extract_plain_text(html, **self.kwargs)


@dataclasses.dataclass(frozen=True)
class _ConvertedContent:
    """``convert_page(html, url, extract_method, config)["content"]`` (picklable)."""

    extract_method: str
    config: ExtractionConfig

    def __call__(self, html: str, url: str | None = None) -> str:
        return convert_page(html, url, self.extract_method, self.config)["content"]


def text_extractor(
    extract_method: str = "readability",
    config: ExtractionConfig = HtmlToMarkdownConfig.default_config(),  # noqa: B008 - Marin's default, frozen
) -> Callable[[str, str | None], str]:
    """``f(html, url)`` equal to ``convert_page(html, url, extract_method, config)["content"]``, resolved once.

    For the resiliparse method with neither ``prepend_title`` nor ``use_custom_variant`` the content
    is ``extract_plain_text(html, **config.resiliparse_kwargs)`` alone: the keyword arguments are
    built here once, and the page's title (which that content does not use) is never looked up.
    Every other method and config goes through :func:`convert_page`. Either way one probe page is
    converted here, so an unknown method, a config of the wrong kind or a missing package fails
    once, when the extractor is made.

    Raises:
        ValueError: as :func:`convert_page` does, for an unknown method or a config of the wrong kind.
        ImportError: the method's package is not installed (trafilatura).
    """
    convert_page("<html><body><p>probe</p></body></html>", None, extract_method, config)
    if (
        extract_method == "resiliparse"
        and isinstance(config, ResiliparseConfig)
        and not config.prepend_title
        and not config.use_custom_variant
    ):
        return _PlainText(config.resiliparse_kwargs)
    return _ConvertedContent(extract_method, config)
