"""The shard-stage base: leftovers cleared, the pool chosen outside the stage configs, one
quarantine schema for every stage, counters with timing."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os

import pytest

from marin_assets.core.shard_stage import (
    LOCAL_WORKERS_ENV,
    QUARANTINE_FIELDS,
    ShardPool,
    current_pool,
    shard_pool,
)
from marin_assets.experiments.curation_pipeline import CURATION_EXTRACTION
from marin_assets.processing.classification.consolidate import ConsolidateConfig
from marin_assets.processing.classification.dedupe import DedupeConfig
from marin_assets.processing.classification.inference import InferenceConfig
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md

from .test_inputs import docs_of, quarantine_of, write_drop_files


@pytest.fixture
def raw_out(tmp_path):
    lines = []
    for i in range(60):
        html = "<html><body><p>   </p></body></html>" if i % 20 == 7 else f"<p>Document number {i} has text.</p>"
        lines.append(json.dumps({"id": f"d-{i}", "text": html}))
    lines.insert(5, "not json at all")
    landing = tmp_path / "landing" / "src"
    write_drop_files(
        str(landing / "drop-1"),
        {
            "a.jsonl.gz": gzip.compress(("\n".join(lines[:30]) + "\n").encode()),
            "b.jsonl": "\n".join(lines[30:]).encode(),
        },
    )
    out = str(tmp_path / "raw")
    meta = run_raw(RawConfig(landing_dir=str(landing), drop_id="drop-1", output_path=out, docs_per_shard=10))
    return out, meta


def test_no_stage_config_carries_use_ray():
    for config in (RawConfig, SimpleHtmlToMdConfig, InferenceConfig, DedupeConfig, ConsolidateConfig):
        assert "use_ray" not in {f.name for f in dataclasses.fields(config)}, config


def test_pool_is_chosen_outside_the_stage(monkeypatch):
    monkeypatch.delenv(LOCAL_WORKERS_ENV, raising=False)
    assert current_pool() == ShardPool("local", 1)
    monkeypatch.setenv(LOCAL_WORKERS_ENV, "3")
    assert current_pool() == ShardPool("local", 3)
    with shard_pool(ShardPool("ray")):
        assert current_pool().backend == "ray"
    assert current_pool() == ShardPool("local", 3)


def test_local_process_pool_gives_the_same_output(raw_out, tmp_path):
    raw, _ = raw_out
    serial = html_to_md(SimpleHtmlToMdConfig(raw, str(tmp_path / "serial"), "resiliparse", CURATION_EXTRACTION))
    with shard_pool(ShardPool("local", workers=2)):
        pooled = html_to_md(SimpleHtmlToMdConfig(raw, str(tmp_path / "pooled"), "resiliparse", CURATION_EXTRACTION))
    assert serial["pool"] == "local:1" and pooled["pool"] == "local:2"
    assert docs_of(str(tmp_path / "serial")) == docs_of(str(tmp_path / "pooled"))
    assert serial["documents_out"] == pooled["documents_out"] and serial["shards"] == pooled["shards"] > 2


def test_leftovers_of_a_failed_attempt_are_cleared(raw_out, tmp_path):
    raw, _ = raw_out
    out = tmp_path / "text"
    for sub, name in (("docs", "shard-99999-0000.jsonl.gz"), ("quarantine", "stale.jsonl")):
        (out / sub).mkdir(parents=True)
        (out / sub / name).write_bytes(gzip.compress(b'{"id": "stale", "text": "old"}\n'))
    html_to_md(SimpleHtmlToMdConfig(raw, str(out), "resiliparse", CURATION_EXTRACTION))
    assert not os.path.exists(out / "docs" / "shard-99999-0000.jsonl.gz")
    assert not os.path.exists(out / "quarantine" / "stale.jsonl")
    assert "stale" not in docs_of(str(out))


def test_one_quarantine_schema_and_counters_with_timing(raw_out, tmp_path):
    raw, raw_meta = raw_out
    text_meta = html_to_md(SimpleHtmlToMdConfig(raw, str(tmp_path / "text"), "resiliparse", CURATION_EXTRACTION))
    raw_rows, text_rows = quarantine_of(raw), quarantine_of(str(tmp_path / "text"))
    assert raw_rows and text_rows
    assert all(tuple(r) == QUARANTINE_FIELDS for r in raw_rows + text_rows)
    assert {r["stage"] for r in raw_rows} == {"raw"} and {r["stage"] for r in text_rows} == {"text"}
    [not_json] = raw_rows
    assert (not_json["file"], not_json["line"], not_json["reason"]) == ("a.jsonl.gz", 6, "not_json")
    assert {r["reason"] for r in text_rows} == {"no_text"} and all(r["id"] and r["line"] for r in text_rows)
    for meta, rate in ((raw_meta, "records_in"), (text_meta, "documents_in")):
        assert meta[rate] > 0 and meta["docs_per_second"] > 0
        assert meta["shard_seconds"]["total"] > 0
    assert text_meta["documents_in"] == raw_meta["documents_out"] == 60
    assert text_meta["documents_out"] + text_meta["quarantined"] == 60
