"""The HTML->text stage record by record: same records out (only text and metadata change), bad
records quarantined with their file and line, shards written whole or not at all."""

from __future__ import annotations

import gzip
import json
import os

from marin_assets.core.compression import GZIP_MAGIC
from marin_assets.core.io import read_jsonl
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin_assets.web.convert import convert_page

ARTICLE = (
    "<html><head><title>t</title></head><body><nav>Home | About | Contact</nav>"
    "<article><h1>On writing shards</h1>{paragraphs}</article><footer>(c) 2024 Example</footer></body></html>"
)


def _page(n: int) -> str:
    body = "".join(
        f"<p>Paragraph {i} of page {n}: a sentence that is long enough to be content. Ünïcode ✓.</p>" for i in range(4)
    )
    return ARTICLE.format(paragraphs=body)


def _records() -> list[dict]:
    records = []
    for n in range(40):
        records.append(
            {
                "id": f"doc-{n}",
                "text": _page(n),
                "source": "test",
                "metadata": {"url": f"https://example.test/{n}", "landing_line": n + 1, "big": 2**70 + n},
                "added": "2024-01-01T00:00:00Z",
            }
        )
    # Field order differs from record to record; it must survive.
    records[3] = {"metadata": {"url": "u"}, "text": _page(3), "id": "doc-3", "extra": [1, 2.5, None]}
    records[5] = {"id": "doc-5", "text": "<html><body><script>x()</script></body></html>", "metadata": {}}
    records[7] = {"id": "doc-7", "text": 12345, "metadata": {}}
    records[9] = {
        "id": "doc-9",
        "text": "  already text\n\nsecond paragraph  ",
        "metadata": {"content_type": "text/plain"},
    }
    return records


def _write_input(root: str, records: list[dict]) -> str:
    """Input shard with a blank line after record 1, so record numbers and file lines differ."""
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    lines.insert(2, "")
    os.makedirs(f"{root}/docs")
    path = f"{root}/docs/shard-00000.jsonl.gz"
    with open(path, "wb") as handle:
        handle.write(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def test_output_is_the_input_with_text_extracted(tmp_path):
    records = _records()
    _write_input(str(tmp_path / "raw"), records)
    out = str(tmp_path / "text")
    meta = html_to_md(SimpleHtmlToMdConfig(str(tmp_path / "raw"), out, "resiliparse", CURATION_EXTRACTION))

    expected = []
    for r in records:
        if r["id"] in ("doc-5", "doc-7"):
            continue
        if r["id"] == "doc-9":
            text = r["text"].strip()
        else:
            text = convert_page(r["text"], None, "resiliparse", CURATION_EXTRACTION)["content"].strip()
        expected.append(
            {**r, "text": text, "metadata": {**r["metadata"], "html_chars": len(r["text"])}, "format": "md"}
        )
    got = list(read_jsonl(f"{out}/docs/shard-00000.jsonl.gz"))
    assert got == expected
    assert [list(g) for g in got] == [list(e) for e in expected]  # field order kept
    assert type(got[0]["metadata"]["big"]) is int
    assert "Paragraph 2 of page 0" in got[0]["text"] and "Home | About" not in got[0]["text"]

    assert meta["documents_in"] == 40 and meta["documents_out"] == 38 and meta["plain_text_passthrough"] == 1
    assert meta["quarantine_reasons"] == {"extract_error": 1, "no_text": 1}
    with open(f"{out}/quarantine/shard-00000.jsonl") as handle:
        rows = [json.loads(line) for line in handle]
    # File lines: records 0-1 on lines 1-2, the blank line 3, record n on line n + 2 from there on.
    assert [(r["id"], r["file"], r["line"], r["reason"]) for r in rows] == [
        ("doc-5", "shard-00000.jsonl.gz", 7, "no_text"),
        ("doc-7", "shard-00000.jsonl.gz", 9, "extract_error"),
    ]
    assert "int" in rows[1]["detail"]


def test_shards_are_gzip_and_no_temporary_file_is_left(tmp_path):
    _write_input(str(tmp_path / "raw"), _records())
    out = tmp_path / "text"
    html_to_md(SimpleHtmlToMdConfig(str(tmp_path / "raw"), str(out), "resiliparse", CURATION_EXTRACTION))
    with open(out / "docs" / "shard-00000.jsonl.gz", "rb") as handle:
        assert handle.read(2) == GZIP_MAGIC
    leftovers = [name for _, _, names in os.walk(out) for name in names if name.startswith(".")]
    assert leftovers == []
