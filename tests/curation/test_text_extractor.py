"""The HTML->text stage's extractor is ``convert_page(...)["content"]``, resolved once."""

from __future__ import annotations

import pickle

import pytest

from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.experiments.sample_data import SampleConfig, iter_pages
from marin_assets.schemas.web.convert import HtmlToMarkdownConfig, ResiliparseConfig
from marin_assets.web.convert import convert_page, text_extractor

ODD_PAGES = [
    "",
    "plain text, no tags",
    "<p>one paragraph</p>",
    "<html><head><title>Title</title></head><body><ul><li>a<li>b</ul><script>x()</script><p>Ünïcode ✓</p></body></html>",
    "<html><body><nav>menu</nav><main><h1>Head</h1><p>Body <a href='/x'>link</a></p><img alt='alt text'></main></body></html>",
]


@pytest.mark.parametrize(
    ("method", "config"),
    [
        ("resiliparse", CURATION_EXTRACTION),
        ("resiliparse", ResiliparseConfig()),
        ("resiliparse", ResiliparseConfig(links=True, alt_texts=True, comments=True, skip_elements=["nav"])),
        ("resiliparse", ResiliparseConfig(prepend_title=True)),
        ("resiliparse", ResiliparseConfig(use_custom_variant=True)),
        ("readability", HtmlToMarkdownConfig.default_config()),
    ],
)
def test_extractor_gives_convert_pages_content(method: str, config) -> None:
    pages = ODD_PAGES + [page.html for page in iter_pages("drop-001", SampleConfig(docs_per_drop=60))]
    extract = pickle.loads(pickle.dumps(text_extractor(method, config)))  # shipped to shard workers
    for page in pages:
        for url in (None, "https://example.test/a/b"):
            assert extract(page, url) == convert_page(page, url, method, config)["content"]


def test_extractor_fails_once_for_a_bad_method_or_config() -> None:
    with pytest.raises(ValueError, match="Invalid extract_method"):
        text_extractor("nonsense", CURATION_EXTRACTION)
    with pytest.raises(ValueError, match="takes a ResiliparseConfig"):
        text_extractor("resiliparse", HtmlToMarkdownConfig.default_config())
