"""Removals explained for runs launched from Dagster: no ``executor_main``, so no experiment record
but the one the Dagster run writes itself -- and, without any record, from the outputs' own
``.executor_info``."""

from __future__ import annotations

import glob
import json
import os
import re

import dagster as dg
import pytest

from marin_assets.browse.server import BrowserApp
from marin_assets.definitions import build_definitions
from marin_assets.execution import StepGraph
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.storage import join_path
from marin_assets.experiments import curation
from marin_assets.experiments.sample_data import SampleConfig, ground_truth_path, write_drop

DROP = "drop-001"

pytestmark = pytest.mark.slow  # a real curation run through Dagster: minutes on 2 cores


def _doc_ids(shard: str) -> set[str]:
    import gzip

    with gzip.open(shard, "rt") as handle:
        return {json.loads(line)["id"] for line in handle if line.strip()}


def test_sensor_launched_curation_run_explains_a_spam_documents_removal(prefix, dagster_home, monkeypatch):
    write_drop(prefix, DROP, SampleConfig(docs_per_drop=160), curation.SOURCE)
    monkeypatch.setenv("MARIN_PREFIX", prefix)
    steps = curation.build_steps(use_ray=False)
    defs = build_definitions([Experiment("curation", list(steps.values()), partitions=curation.PARTITIONS)])
    instance = dg.DagsterInstance.get()

    # What the daemon does for the landing sensor: add the drop's partition, launch the drop job.
    result = defs.resolve_sensor_def("landing_sensor_sample_html")(
        dg.build_sensor_context(instance=instance, definitions=defs, resources=defs.resources)
    )
    (request,) = result.run_requests
    (add_request,) = result.dynamic_partitions_requests
    instance.add_dynamic_partitions(add_request.partitions_def_name, list(add_request.partition_keys))
    run = defs.resolve_job_def("curation_drop_job").execute_in_process(
        instance=instance, partition_key=request.partition_key, tags=request.tags
    )
    assert run.success
    (record_path,) = glob.glob(os.path.join(prefix, "experiments", "curation-*.json"))
    with open(record_path) as handle:
        assert json.load(handle)["run_id"] == run.run_id

    graph = StepGraph(list(steps.values()), prefix, {curation.PARTITION_SET: [DROP]})
    text = graph.resolved(steps["text"]).partition_output_path(DROP)
    consolidated = graph.resolved(steps["consolidated"]).partition_output_path(DROP)
    with open(ground_truth_path(prefix, curation.SOURCE, DROP)) as handle:
        spam = {doc for doc, label in json.load(handle)["labels"].items() if label == "lq"}
    kept = set().union(*(_doc_ids(p) for p in glob.glob(join_path(consolidated, "docs/*.jsonl.gz"))))
    # A planted spam page that reached the text output and that consolidate removed.
    candidates = [
        (os.path.basename(shard), doc)
        for shard in sorted(glob.glob(join_path(text, "docs/*.jsonl.gz")))
        for doc in sorted(_doc_ids(shard) & spam - kept)
    ]
    assert candidates, "no planted spam document was removed"
    shard, doc = candidates[0]

    _assert_removal_explained(prefix, text, consolidated, shard, doc)
    # Outputs no experiment record lists (computed before records were written, or through the
    # library's run_steps): the same, from the outputs' own .executor_info.
    os.remove(record_path)
    _assert_removal_explained(prefix, text, consolidated, shard, doc)


def _assert_removal_explained(prefix: str, text: str, consolidated: str, shard: str, doc: str) -> None:
    """The spam document's page shows its quality score and the filter that removed it."""
    app = BrowserApp(prefix)
    page = app.get(f"/doc/{os.path.relpath(text, prefix)}/docs/{shard}?id={doc}")
    assert page.status == 200
    # Its attributes: the quality score (and the dedup attribute) ...
    assert "<p>none</p>" not in page.body
    attributes = page.body.split("<h2>Attributes</h2>", 1)[1].split("<h2>", 1)[0]
    assert "quality" in attributes and "__label__hq" in attributes
    # ... and the filter that removed it, with the score against its threshold.
    reason = re.search(r"id='removal-reason'[^>]*>([^<]*)<", page.body)
    assert reason is not None, page.body[:2000]
    assert re.search(r"removed — low quality: quality\[__label__hq\] = [0-9.e-]+ &lt; 0\.5", reason.group(1))
    removed_by = re.search(r"<p id='removed-by'>In <a href=\"([^\"]*)\">curation/consolidated</a>", page.body)
    assert removed_by is not None and removed_by.group(1) == f"/browse/{os.path.relpath(consolidated, prefix)}"
    # The curation output links to its input, filtered to what it removed.
    listing = app.get(f"/browse/{os.path.relpath(consolidated, prefix)}/docs/{shard}")
    removed_link = re.search(r'<a href="([^"]*)" id="removed-link">', listing.body)
    assert listing.status == 200 and removed_link is not None
    assert removed_link.group(1).startswith(f"/browse/{os.path.relpath(text, prefix)}/docs/{shard}?")
