"""The drops table of a landing zone (``landing/<source>``): what each drop's status says, and what
a ``landing_status`` tick costs (one listing plus the drops not processed yet)."""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest

from marin_assets.dagster_bridge import landing_assets
from marin_assets.dagster_bridge.landing_assets import drop_rows, rows_metadata
from marin_assets.dagster_bridge.landing_sensor import RUN_TAG
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_assets.landing import table
from marin_assets.landing.table import zone_rows
from marin_assets.landing.zone import LandingDrops

SOURCE = "web"
DROPS = LandingDrops(f"landing/{SOURCE}")
KEY = dg.AssetKey(["web", "consolidated"])


@pytest.fixture
def instance(dagster_home):
    with dg.DagsterInstance.get() as inst:
        yield inst


def _drop(prefix: str, drop: str) -> str:
    write_drop(prefix, drop, SampleConfig(docs_per_drop=5), SOURCE)
    return os.path.join(prefix, "landing", SOURCE, drop)


@dg.op
def _fails() -> None:
    raise RuntimeError("dedup exploded")


@dg.job
def _drop_run() -> None:
    _fails()


def test_a_drop_whose_run_failed_reads_failed_not_valid(prefix, instance):
    for drop in ("drop-001", "drop-002", "drop-003"):
        _drop(prefix, drop)
    instance.report_runless_asset_event(dg.AssetMaterialization(KEY, partition="drop-001"))
    run = _drop_run.execute_in_process(
        instance=instance, raise_on_error=False, tags={RUN_TAG: SOURCE, "marin/drop": "drop-002"}
    )
    assert not run.success
    rows = {r["drop"]: r for r in drop_rows(instance, prefix, DROPS, [KEY], verify=False)}
    assert [rows[d]["status"] for d in ("drop-001", "drop-002", "drop-003")] == ["processed", "failed", "valid"]
    assert run.run_id in rows["drop-002"]["reason"]
    meta = rows_metadata(list(rows.values()))
    assert meta["count/failed"].value == 1 and meta["count/valid"].value == 1
    # A later run that succeeds makes it processed.
    instance.report_runless_asset_event(dg.AssetMaterialization(KEY, partition="drop-002"))
    rows = {r["drop"]: r for r in drop_rows(instance, prefix, DROPS, [KEY], verify=False, state={})}
    assert rows["drop-002"]["status"] == "processed"


def test_a_status_tick_reads_only_drops_not_processed_yet(prefix, monkeypatch):
    folder = DROPS.folder(prefix)
    for i in range(1, 5):
        _drop(prefix, f"drop-{i:03d}")
    processed = {"drop-001", "drop-002", "drop-003"}
    state: dict = {}
    first = zone_rows(folder, SOURCE, processed, False, state)
    assert [r["status"] for r in first] == ["processed"] * 3 + ["valid"]
    assert state["processed"] == {"2": ["drop-{001..003}"]}  # compact: file count -> drops
    # A processed drop is checked again by its content (manifest + a sha256 per file, round robin): garbage
    # in its manifest flags it "changed after processing"; the others are not hashed again.
    with open(os.path.join(folder, "drop-002", "manifest.json"), "w") as handle:
        handle.write("garbage")
    validated: list[str] = []
    real = table.validate_drop
    monkeypatch.setattr(
        table,
        "validate_drop",
        lambda p, d, verify_checksums=True: validated.append(d) or real(p, d, verify_checksums),
    )
    again = zone_rows(folder, SOURCE, processed, False, state)
    assert [r["status"] for r in again] == ["processed", "changed after processing", "processed", "valid"]
    assert "manifest.json is not valid" in again[1]["reason"] and "new drop id" not in again[0]["reason"]
    assert [r for i, r in enumerate(again) if i != 1] == [r for i, r in enumerate(first) if i != 1]
    assert validated == ["drop-004"]  # the unprocessed drop: cheap checks only, its checksums are cached
    # A drop whose checksums fail reads rejected (hashed once, then cached).
    bad = _drop(prefix, "drop-005")
    with open(os.path.join(bad, "manifest.json")) as handle:
        manifest = json.load(handle)
    manifest["files"][0]["sha256"] = "0" * 64
    with open(os.path.join(bad, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    rows = zone_rows(folder, SOURCE, processed, False, state)
    assert rows[-1]["status"] == "rejected" and "sha256" in rows[-1]["reason"]


def test_the_table_keeps_its_size_with_thousands_of_processed_drops():
    rows = [
        {"drop": f"drop-{i:05d}", "status": "processed", "reason": "", "files": 1, "path": "p"} for i in range(2000)
    ]
    rows.append({"drop": "drop-02000", "status": "rejected", "reason": "bad", "files": 1, "path": "p"})
    meta = rows_metadata(rows)
    shown = [r.data["drop"] for r in meta["drops"].records]
    assert len(shown) == landing_assets.PROCESSED_ROWS_SHOWN + 1 and shown[-1] == "drop-02000"
    assert meta["count/processed"].value == 2000 and meta["hidden_processed_rows"].value == 1500
