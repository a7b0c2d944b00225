"""The browser bounds what one request decodes whatever the parquet layout (issue 37, item 2): one
huge data page, one huge cell, a footer of many row groups -- each answered with a truncated
preview that says so, the rest of the rows shown. Fast (small files, a small limit)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from marin_assets.browse.server import BrowserApp
from marin_assets.core.parquet_layout import page_sizes

REPO = Path(__file__).resolve().parents[2]
LIMIT = 256 << 10


def _one_page(path: Path) -> None:
    rows = 2000
    table = pa.table(
        {"id": [f"row-{i}" for i in range(rows)], "text": [f"text {i} " + "z" * 1000 for i in range(rows)]}
    )
    pq.write_table(table, path, row_group_size=rows, data_page_size=64 << 20, compression="none")


def _one_cell(path: Path, cell_bytes: int = 2 << 20) -> None:
    ids = [f"c-{i}" for i in range(6)]
    pq.write_table(pa.table({"id": ids, "text": ["short"] * 5 + ["y" * cell_bytes]}), path, compression="none")


def test_page_sizes_come_from_the_headers_alone(tmp_path):
    _one_page(tmp_path / "p.parquet")
    meta = pq.ParquetFile(tmp_path / "p.parquet").metadata
    column = meta.row_group(0).column(1)
    with open(tmp_path / "p.parquet", "rb") as handle:
        start = min(column.data_page_offset, column.dictionary_page_offset or column.data_page_offset)
        sizes = list(page_sizes(handle, start, column.total_compressed_size))
    assert max(u for u, _ in sizes) > 0.9 * column.total_uncompressed_size  # one data page: the whole column
    assert sum(c for _, c in sizes) < column.total_compressed_size  # headers are not pages


def test_one_huge_data_page_is_left_out_and_the_page_says_so(tmp_path):
    _one_page(tmp_path / "one_page.parquet")
    app = BrowserApp(str(tmp_path), max_read_bytes=LIMIT)
    response = app.get("/browse/one_page.parquet?n=5&start=10")
    assert response.status == 200
    assert "Preview truncated" in response.body and "data page of" in response.body
    assert "row-10" in response.body and "row-14" in response.body and "text 10 " not in response.body
    # The same file with room for its page: shown whole, no note.
    roomy = BrowserApp(str(tmp_path)).get("/browse/one_page.parquet?n=5&start=10")
    assert "Preview truncated" not in roomy.body and "text 10 " in roomy.body


def test_one_huge_cell_keeps_the_other_columns_and_a_document_page_answers(tmp_path):
    _one_cell(tmp_path / "one_cell.parquet")
    app = BrowserApp(str(tmp_path), max_read_bytes=LIMIT)
    response = app.get("/browse/one_cell.parquet?n=10")
    assert response.status == 200 and "Preview truncated" in response.body
    assert all(f"c-{i}" in response.body for i in range(6))
    doc = app.get("/doc/one_cell.parquet?id=c-5&i=5")
    assert doc.status == 200 and "[not shown" in doc.body
    assert app.get("/doc/one_cell.parquet?id=c-2").status == 200  # found by a scan too


def test_a_footer_over_the_limit_is_not_parsed(tmp_path):
    groups = 3000
    table = pa.table({"id": [f"g-{i}" for i in range(groups)], "text": ["t"] * groups})
    pq.write_table(table, tmp_path / "row_groups.parquet", row_group_size=1)
    app = BrowserApp(str(tmp_path), max_read_bytes=64 << 10)
    response = app.get("/browse/row_groups.parquet")
    assert response.status == 200 and "Preview truncated" in response.body and "footer" in response.body
    assert "g-0" in BrowserApp(str(tmp_path)).get("/browse/row_groups.parquet").body


_PEAK = """
import sys, pyarrow as pa
from marin_assets.browse.server import BrowserApp
app = BrowserApp(sys.argv[1], max_read_bytes=1 << 20)
before = pa.default_memory_pool().max_memory()
response = app.get("/browse/one_cell.parquet?n=10")
assert response.status == 200 and "Preview truncated" in response.body, response.body[:2000]
print(pa.default_memory_pool().max_memory() - before)
"""


def test_a_huge_cell_costs_arrow_no_more_than_the_limit(tmp_path):
    _one_cell(tmp_path / "one_cell.parquet", cell_bytes=16 << 20)
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peak = int(done.stdout.strip().splitlines()[-1])
    assert peak < 2 << 20, f"Arrow peak {peak >> 20} MiB for a 16 MiB cell under a 1 MiB limit"
