"""One ``read_json`` contract: the parsed value; FileNotFoundError when missing; ValueError naming the
file when it is not JSON. Readers for whom a missing or broken record is normal say so themselves."""

from __future__ import annotations

import pytest

from marin_assets.core import io
from marin_assets.execution import storage
from marin_assets.execution.status import INFO_FILE, read_info, read_metadata


def test_one_read_json_with_one_contract(tmp_path):
    assert io.read_json is storage.read_json
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2]}')
    assert storage.read_json(str(good)) == {"a": [1, 2]}
    with pytest.raises(FileNotFoundError):
        storage.read_json(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ')
    with pytest.raises(ValueError, match="bad.json is not JSON"):
        storage.read_json(str(bad))


def test_status_readers_show_a_missing_or_broken_record_as_absent(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert read_info(str(out)) is None and read_metadata(str(out)) == {}
    (out / INFO_FILE).write_text("{half-written")
    assert read_info(str(out)) is None
    (out / INFO_FILE).write_text('["not", "a", "record"]')
    assert read_info(str(out)) is None
    (out / INFO_FILE).write_text('{"name": "x"}')
    assert read_info(str(out)) == {"name": "x"}
