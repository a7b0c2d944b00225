"""Stage correctness on the sample corpus, checked against the generator's ground truth."""

from __future__ import annotations

from marin_assets.experiments.curation_pipeline import (
    check_classifier_accuracy,
    check_ids_unique,
    check_no_empty_text,
    check_planted_duplicates_removed,
)
from marin_assets.experiments.sample_data import ground_truth_path

from .conftest import SOURCE


def test_every_step_ran(pipeline):
    for role in ("raw", "text", "quality", "dedup", "consolidated"):
        for drop in pipeline.drops:
            outcome = pipeline.outcomes[(pipeline.steps[role].name, drop)]
            assert outcome.action == "ran", (role, drop, outcome.error)
    assert pipeline.outcomes[(pipeline.steps["quality_model"].name, None)].action == "ran"


def test_raw_keeps_everything(pipeline):
    for drop in pipeline.drops:
        truth = pipeline.truth(drop)
        docs = pipeline.docs("raw", drop)
        assert {d["id"] for d in docs} == set(truth["labels"])
        assert all(d["added"] and d["source"] == SOURCE for d in docs)


def test_boilerplate_removed_and_content_kept(pipeline):
    for drop in pipeline.drops:
        truth = pipeline.truth(drop)
        docs = pipeline.docs("text", drop)
        for d in docs:
            for marker in truth["boilerplate_markers"]:
                assert marker not in d["text"], (d["id"], marker)
        hq = [d for d in docs if truth["labels"][d["id"]] == "hq"]
        # Every high-quality page survives extraction with its paragraphs as separate lines.
        assert len(hq) == sum(1 for v in truth["labels"].values() if v == "hq")
        assert all(d["text"].count("\n") >= 3 for d in hq)
        for p in truth["para_dups"]:
            text = next(d["text"] for d in docs if d["id"] == p["id"])
            assert p["paragraph"] in text


def test_classifier_separates_classes(pipeline):
    passed, meta = check_classifier_accuracy(pipeline.path("quality_model"), floor=0.9)
    assert passed, meta
    right = total = 0
    for drop in pipeline.drops:
        truth = pipeline.truth(drop)
        for doc_id, attrs in pipeline.attributes("quality", drop).items():
            total += 1
            right += (attrs["quality"]["__label__hq"] >= 0.5) == (truth["labels"][doc_id] == "hq")
    assert right / total >= 0.95, (right, total)


def test_every_planted_duplicate_found_no_false_positives(pipeline):
    for drop in pipeline.drops:
        truth = pipeline.truth(drop)
        attrs = pipeline.attributes("dedup", drop)
        planted = {d["id"]: d["of"] for d in truth["exact_dups"] + truth["near_dups"]}
        flagged = {i: a["fuzzy_duplicate_of"] for i, a in attrs.items() if a["fuzzy_duplicate"]}
        assert set(flagged) == set(planted), (drop, set(planted) ^ set(flagged))
        for doc_id, of in planted.items():
            # The original or (when it was itself a copy) an equal earlier copy.
            assert flagged[doc_id] == of or flagged[doc_id] in planted, (doc_id, of, flagged[doc_id])
        cross = [i for i, of in planted.items() if not of.startswith(drop)]
        if drop != pipeline.drops[0]:
            assert cross and all(not flagged[i].startswith(drop) for i in cross)
        # Paragraph dedup: the quoted paragraph is marked in the copy, not in its source page.
        for p in truth["para_dups"]:
            spans = attrs[p["id"]]["duplicate_text"]
            assert spans, p["id"]
        texts = {d["id"]: d["text"] for d in pipeline.docs("text", drop)}
        for p in truth["para_dups"]:
            marked = [texts[p["id"]][int(s) : int(e)] for s, e, _ in attrs[p["id"]]["duplicate_text"]]
            assert p["paragraph"] in marked, p["id"]
            if p["of"].startswith(drop) and p["of"] not in planted:
                source_spans = attrs[p["of"]]["duplicate_text"]
                assert p["paragraph"] not in [texts[p["of"]][int(s) : int(e)] for s, e, _ in source_spans]


def test_consolidated_checks_pass(pipeline):
    for drop in pipeline.drops:
        out = pipeline.path("consolidated", drop)
        for check in (check_ids_unique, check_no_empty_text):
            passed, meta = check(out)
            assert passed, (check.__name__, meta)
        passed, meta = check_planted_duplicates_removed(out, ground_truth_path(pipeline.prefix, SOURCE, drop))
        assert passed, meta
        assert meta["planted_document_duplicates"] > 0
        truth = pipeline.truth(drop)
        kept = {d["id"] for d in pipeline.docs("consolidated", drop)}
        planted = {d["id"] for d in truth["exact_dups"] + truth["near_dups"]}
        hq_originals = {i for i, label in truth["labels"].items() if label == "hq"} - planted
        lq = {i for i, label in truth["labels"].items() if label == "lq"}
        assert len(kept & lq) <= 0.03 * len(lq)
        assert len(hq_originals - kept) <= 0.03 * len(hq_originals)
        meta = pipeline.outcomes[(pipeline.steps["consolidated"].name, drop)].metadata
        assert meta["documents_out"] == len(kept) and meta["removed_by_quality"] > 0


def test_checks_detect_problems(tmp_path):
    import gzip
    import json

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "shard-00000.jsonl.gz").write_bytes(
        gzip.compress(b'{"id": "a", "text": "x"}\n{"id": "a", "text": " "}\n')
    )
    assert not check_ids_unique(str(tmp_path))[0]
    assert not check_no_empty_text(str(tmp_path))[0]
    truth = {"exact_dups": [{"id": "a", "of": "z"}], "near_dups": [], "para_dups": []}
    (tmp_path / "t.json").write_text(json.dumps(truth))
    assert not check_planted_duplicates_removed(str(tmp_path), str(tmp_path / "t.json"))[0]
    assert check_planted_duplicates_removed(str(tmp_path), str(tmp_path / "none.json"))[0]
    (tmp_path / "report.json").write_text(json.dumps({"holdout_accuracy": 0.5}))
    assert not check_classifier_accuracy(str(tmp_path), floor=0.8)[0]
