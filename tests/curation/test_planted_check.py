"""``planted_duplicates_removed`` after a rejected drop: copies of documents in a drop dedup never
saw (it never became a partition) are not counted against the drop that holds them."""

from __future__ import annotations

import json
import os

from marin_assets.core.io import write_jsonl_gz
from marin_assets.experiments.curation_pipeline import check_planted_duplicates_removed
from marin_assets.experiments.sample_data import SampleConfig, generate_drop


def _consolidated(root: str, drop: str, docs: dict[str, str]) -> str:
    path = os.path.join(root, "consolidated", drop)
    write_jsonl_gz(os.path.join(path, "docs", "shard-00000.jsonl.gz"), [{"id": i, "text": t} for i, t in docs.items()])
    return path


def _truth(tmp_path, truth: dict) -> str:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(truth))
    return str(path)


def test_copies_of_a_rejected_drops_documents_do_not_fail_the_check(tmp_path):
    root = str(tmp_path)
    _consolidated(root, "drop-001", {"drop-001-000001": "original one"})
    # drop-002 was rejected: no partition, no output. drop-003 holds a copy of a drop-002 document
    # (dedup never saw the original: it stays) and a copy of a drop-001 document.
    truth = {
        "drop_id": "drop-003",
        "exact_dups": [
            {"id": "drop-003-000010", "of": "drop-002-000004", "of_drop": "drop-002"},
            {"id": "drop-003-000011", "of": "drop-001-000001", "of_drop": "drop-001"},
        ],
        "near_dups": [{"id": "drop-003-000012", "of": "drop-002-000005"}],  # older truth: no of_drop
        "para_dups": [{"id": "drop-003-000013", "of": "drop-002-000006", "of_drop": "drop-002", "paragraph": "q"}],
    }
    kept = {"drop-003-000010": "copy", "drop-003-000012": "near copy", "drop-003-000013": "text with q"}
    passed, meta = check_planted_duplicates_removed(_consolidated(root, "drop-003", kept), _truth(tmp_path, truth))
    assert passed, meta
    assert meta["originals_not_seen"] == 3 and meta["planted_document_duplicates"] == 1
    # A surviving copy of a document dedup did see still fails it.
    kept["drop-003-000011"] = "copy of one"
    passed, meta = check_planted_duplicates_removed(_consolidated(root, "drop-003", kept), _truth(tmp_path, truth))
    assert not passed and meta["surviving_document_duplicates"] == 1 and meta["examples"] == ["drop-003-000011"]


def test_the_ground_truth_names_the_drop_of_every_original():
    _, truth = generate_drop("drop-003", SampleConfig(docs_per_drop=200))
    copies = truth["exact_dups"] + truth["near_dups"] + truth["para_dups"]
    assert copies and all(c["of_drop"] == c["of"].rsplit("-", 1)[0] for c in copies)
    assert {c["of_drop"] for c in copies} - {"drop-003"}  # cross-drop copies exist
