"""The generator is deterministic and its ground truth is consistent."""

from __future__ import annotations

from marin_assets.landing.sample_data import SampleConfig, generate_drop, main
from marin_assets.landing.zone import STATUS_VALID, scan_landing_zone

CFG = SampleConfig(docs_per_drop=150)


def test_deterministic_and_labelled():
    a, truth_a = generate_drop("drop-002", CFG)
    b, truth_b = generate_drop("drop-002", CFG)
    assert a == b and truth_a == truth_b
    assert len(a) == 150
    assert {r["id"] for r in a} == set(truth_a["labels"])
    assert set(truth_a["labels"].values()) == {"hq", "lq"}
    for r in a:
        assert r["text"].startswith("<!DOCTYPE html>") and r["metadata"]["url"].startswith("https://")
    # A different seed gives different pages.
    c, _ = generate_drop("drop-002", SampleConfig(docs_per_drop=150, seed=7))
    assert [r["text"] for r in c] != [r["text"] for r in a]


def test_copies_point_backwards():
    _, t1 = generate_drop("drop-001", CFG)
    records, t3 = generate_drop("drop-003", CFG)
    order = {r["id"]: i for i, r in enumerate(records)}
    copies = t3["exact_dups"] + t3["near_dups"] + t3["para_dups"]
    assert t3["exact_dups"] and t3["near_dups"] and t3["para_dups"]
    cross = [c for c in copies if not c["of"].startswith("drop-003")]
    assert cross, "drop 3 must copy pages of earlier drops"
    for c in copies:
        if c["of"].startswith("drop-003"):
            assert order[c["of"]] < order[c["id"]]
        else:
            assert c["of"] < "drop-003"
    # An exact copy of drop 1 has exactly the HTML of its original.
    drop1, _ = generate_drop("drop-001", CFG)
    html1 = {r["id"]: r["text"] for r in drop1}
    html3 = {r["id"]: r["text"] for r in records}
    for c in t3["exact_dups"]:
        if c["of"].startswith("drop-001"):
            assert html3[c["id"]] == html1[c["of"]]
            assert t1["labels"][c["of"]] == "hq"


def test_cli_writes_complete_drop(tmp_path, capsys):
    main(["--prefix", str(tmp_path), "--drop", "drop-004", "--docs", "40"])
    assert "drop-004" in capsys.readouterr().out
    [drop] = scan_landing_zone(str(tmp_path))
    assert (drop.drop_id, drop.status) == ("drop-004", STATUS_VALID)
    assert sum(f["records"] for f in drop.manifest["files"]) == 40
