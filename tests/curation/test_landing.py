"""Landing-zone validation: complete, incomplete, unsafe, tampered drops; scanning never raises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing.zone import (
    STATUS_INCOMPLETE,
    STATUS_REJECTED,
    STATUS_VALID,
    drop_sort_key,
    safe_drop_id,
    scan_landing_zone,
)


@pytest.fixture
def zone(tmp_path):
    prefix = str(tmp_path)
    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=20), "src")
    return prefix


def _status(prefix):
    return {d.drop_id: (d.status, d.reason) for d in scan_landing_zone(prefix)}


def test_valid_and_incomplete(zone):
    os.makedirs(f"{zone}/landing/src/drop-002")
    with open(f"{zone}/landing/src/drop-002/part-0.jsonl", "w") as f:
        f.write('{"id": "x", "text": "y"}\n')
    st = _status(zone)
    assert st["drop-001"][0] == STATUS_VALID
    assert st["drop-002"][0] == STATUS_INCOMPLETE
    assert scan_landing_zone(f"{zone}/nowhere") == []


@pytest.mark.parametrize("name", ["..", "a/b", "bad\x01name", "x" * 129, "", " lead", "-x"])
def test_unsafe_ids(name):
    assert safe_drop_id(name) is not None


def test_unsafe_folder_names_rejected(zone):
    os.makedirs(f"{zone}/landing/src/bad\x07bell")
    os.makedirs(f"{zone}/landing/src/" + "y" * 200)
    st = _status(zone)
    assert st["bad\x07bell"][0] == STATUS_REJECTED and "unsafe" in st["bad\x07bell"][1]
    assert st["y" * 200][0] == STATUS_REJECTED
    assert st["drop-001"][0] == STATUS_VALID  # one bad drop does not hide the others


def test_tampered_and_malformed_manifests(zone):
    drop = f"{zone}/landing/src/drop-001"
    manifest = json.loads(Path(f"{drop}/manifest.json").read_text())
    with open(f"{drop}/part-00000.jsonl.gz", "r+b") as f:  # flip a byte, same size
        f.seek(20)
        b = f.read(1)
        f.seek(20)
        f.write(bytes([b[0] ^ 0xFF]))
    status, reason = _status(zone)["drop-001"]
    assert status == STATUS_REJECTED and "sha256" in reason

    cases = {
        "drop-010": "{not json",
        "drop-011": json.dumps({"files": "nope"}),
        "drop-012": json.dumps({"files": [{"path": "../../etc/passwd", "sha256": "0" * 64}]}),
        "drop-013": json.dumps({"files": [{"path": "missing.jsonl", "sha256": "0" * 64}]}),
        "drop-014": json.dumps({"files": []}),
        "drop-015": json.dumps({"drop_id": "other", "files": manifest["files"]}),
        "drop-016": json.dumps([1, 2]),
    }
    for name, text in cases.items():
        os.makedirs(f"{zone}/landing/src/{name}")
        with open(f"{zone}/landing/src/{name}/manifest.json", "w") as f:
            f.write(text)
    st = _status(zone)
    for name in cases:
        assert st[name][0] == STATUS_REJECTED, (name, st[name])
    assert "unsafe path" in st["drop-012"][1]
    assert "missing" in st["drop-013"][1]


def test_drop_order_is_numeric():
    assert sorted(["drop-10", "drop-9", "drop-100"], key=drop_sort_key) == ["drop-9", "drop-10", "drop-100"]


def test_write_manifest_makes_a_folder_of_files_a_valid_drop(tmp_path, capsys):
    """A user's own files (a WET file, a parquet with other column names, a saved HF dataset)
    become a drop with one command; the raw stage then reads every one of them."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from marin_assets.landing.zone import main, write_manifest
    from marin_assets.transform.raw.process import RawConfig, run_raw
    from marin_assets.transform.raw.warc_writer import WarcPage, write_warc_gz

    drop = tmp_path / "landing" / "web" / "drop-007"
    drop.mkdir(parents=True)
    with open(drop / "crawl.warc.wet.gz", "wb") as handle:
        write_warc_gz(
            handle, [WarcPage("t", "https://t.example/", "2024-05-01T00:00:00Z", "Some text.", plain_text=True)]
        )
    pq.write_table(pa.table({"content": ["parquet text"], "url": ["https://p.example/"]}), drop / "rows.parquet")
    datasets.Dataset.from_dict({"content": ["hf text"]}).save_to_disk(str(drop / "hf"))
    (drop / ".upload-tmp").write_text("partial")  # hidden: not part of the drop
    assert _status(str(tmp_path))["drop-007"][0] == STATUS_INCOMPLETE
    main([str(drop)])
    assert "manifest.json" in capsys.readouterr().out
    assert _status(str(tmp_path))["drop-007"] == (STATUS_VALID, "")
    with open(drop / "manifest.json") as handle:
        listed = {f["path"] for f in json.load(handle)["files"]}
    assert "rows.parquet" in listed and ".upload-tmp" not in listed and any(p.startswith("hf/") for p in listed)
    meta = run_raw(RawConfig(str(drop.parent), "drop-007", str(tmp_path / "raw"), text_key="content"))
    assert meta["documents_out"] == 3 and meta["quarantined"] == 0
    assert meta["formats"] == {"hf-dataset": 1, "parquet": 1, "warc.gz": 1}
    os.symlink("/etc/hostname", drop / "link.txt")
    with pytest.raises(ValueError, match="link.txt is a symlink"):
        write_manifest(str(drop))
