"""End to end through the landing sensor and the real curation pipeline (issue 37, tests): a drop of
bad records, a drop whose folder is 1,100 levels deep, a drop still uploading, then a good drop.
No sensor tick fails; the deep drop is rejected with one line naming it and the uploading one waits;
the bad drop's good records reach the raw output and its bad ones are quarantined by id; the good
drop's records reach the consolidated output. Slow (the whole pipeline on two drops)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pytest

from marin_assets.core.io import list_files, read_jsonl
from marin_assets.dagster_bridge.landing_sensor import build_landing_sensor
from marin_assets.execution.status import read_metadata, read_status
from marin_assets.experiments.sample_data import write_drop
from marin_assets.landing.zone import landing_root
from tests.curation.conftest import SMALL, SOURCE, run_pipeline
from tests.curation.test_drop_edges import _deep_folder, _remove_deep, bad_records_drop

pytestmark = pytest.mark.slow

drops_def = dg.DynamicPartitionsDefinition(name="edge_pipeline_drops")


@dg.asset(partitions_def=drops_def)
def edge_pipeline_target(context) -> None:  # a stand-in target: the sensor only needs something partitioned
    context.log.info(context.partition_key)


def test_bad_drops_then_a_good_drop_through_the_sensor_and_the_pipeline(tmp_path, dagster_home):
    prefix = str(tmp_path / "prefix")
    source_dir = os.path.join(landing_root(prefix), SOURCE)
    expected = bad_records_drop(prefix, "drop-001", SOURCE)
    deep = os.path.join(source_dir, "drop-002")
    os.makedirs(deep)
    Path(deep, "part.jsonl").write_text(json.dumps({"id": "d", "text": "deep"}) + "\n")
    _deep_folder(deep, 1100)
    write_drop(prefix, "drop-003", SMALL, SOURCE)  # then its upload "restarts": the data is half there
    uploading = Path(source_dir, "drop-003", "part-00000.jsonl.gz")
    uploading.write_bytes(uploading.read_bytes()[:100])
    write_drop(prefix, "drop-004", SMALL, SOURCE)
    try:
        sensor = build_landing_sensor(
            dg.AssetSelection.assets(edge_pipeline_target), drops_def, lambda: prefix, source=SOURCE
        )
        requested: list[str] = []
        with dg.DagsterInstance.get() as instance:
            cursor = None
            for _ in range(3):
                result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
                assert isinstance(result, dg.SensorResult)  # no tick fails
                cursor = result.cursor
                requested += [r.partition_key for r in result.run_requests]
                for request in result.dynamic_partitions_requests or []:
                    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        state = json.loads(cursor)
        assert requested == ["drop-001", "drop-004"]
        assert set(state["rejected"]) == {"drop-002"} and "deeper than" in state["rejected"]["drop-002"]

        run = run_pipeline(prefix, requested)
        for drop in requested:
            assert read_status(run.path("consolidated", drop)).status == "SUCCESS", drop
        raw = run.path("raw", "drop-001")
        raw_ids = {r["id"] for f in list_files(os.path.join(raw, "docs"), ".jsonl.gz") for r in read_jsonl(f)}
        assert expected["good"] <= raw_ids
        quarantined = {
            r["id"] for f in list_files(os.path.join(raw, "quarantine"), ".jsonl") for r in read_jsonl(f) if r["id"]
        }
        assert expected["quarantined"] <= quarantined and not expected["quarantined"] & raw_ids
        consolidated = {d["id"] for d in run.docs("consolidated", "drop-004")}
        assert consolidated and read_metadata(run.path("consolidated", "drop-004"))["documents_out"] == len(
            consolidated
        )
        raw4 = run.path("raw", "drop-004")
        assert consolidated <= {
            r["id"] for f in list_files(os.path.join(raw4, "docs"), ".jsonl.gz") for r in read_jsonl(f)
        }
    finally:
        _remove_deep(deep)
