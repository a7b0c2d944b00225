"""Marin's curation-side scripts run here with only their imports changed (``marin_import``): the
integration-test pipeline (HTML -> markdown -> fastText -> inference -> dedupe -> consolidate ->
tokenize -> Levanter), a train/test-overlap dedupe, and a ``ResourceConfig.with_cpu()`` sweep. Each
re-runs fully cached. CPU, offline: local data folders and a local tokenizer directory."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest
import yaml

from marin_assets.core.io import read_jsonl_gz
from tests.conformance.marin_import import map_imports, recorded_paths, run_marin_script, summary
from tests.conftest import marin_hash
from tests.published_files import files_naming_a_staging_folder


def test_fray_cluster_maps_first():
    source = "from fray.cluster import ResourceConfig\nfrom marin.resources import CpuOnlyConfig\n"
    source += (
        "from marin.processing.classification.dedupe import dedupe\nfrom experiments.defaults import default_train\n"
    )
    assert map_imports(source) == (
        "from marin_resources import ResourceConfig\nfrom marin_resources import CpuOnlyConfig\n"
        "from marin_assets.processing.classification.dedupe import dedupe\n"
        "from marin_assets.experiments.defaults import default_train\n"
    )


def _write_jsonl_gz(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def _docs(folder: Path) -> dict[str, dict]:
    return {r["id"]: r for f in sorted(folder.rglob("*.jsonl.gz")) for r in read_jsonl_gz(str(f))}


# ------------------------------------------------------------------------------------------
# train_test_overlap/dolma/overlap_starcoder.py

CODE = [
    "def add(a, b): return a + b and then we print the sum of the two numbers to the screen for the user",
    "for item in items: total = total + item.price * item.quantity when the cart is checked out at the end",
]
QUESTION = "Which of the following is a prime number: four, six, nine, eleven, fifteen, twenty or thirty?"


def test_overlap_dedupe_marks_contaminated_paragraphs_and_reruns_cached(prefix):
    root = Path(prefix).parent
    _write_jsonl_gz(
        root / "documents/starcoderdata/part-0.jsonl.gz",
        [{"id": f"code-{i}", "text": f"# file {i}\n\n{text}\n\nreturn None"} for i, text in enumerate(CODE)],
    )
    dev = [
        {"id": "q-clean", "text": QUESTION},
        {"id": "q-copied", "text": f"{QUESTION}\n{CODE[0]}"},
        {"id": "q-edited", "text": CODE[1].replace("checked out", "paid")},  # 2 of 8 13-grams survive: not marked
    ]
    _write_jsonl_gz(root / "dolma/mmlu_dev_set/sub/dev.jsonl.gz", dev)

    first = run_marin_script("overlap", prefix)
    assert first.returncode == 0, first.stderr[-3000:]
    name = "train_test_overlap/decontaminate_starcoder_againstmmlu_ngram500"
    # Nothing in the config is versioned (plain strings): Marin's version is name + empty config.
    expected = f"{name}-{marin_hash({'name': name, 'config': {}, 'dependencies': []})}"
    assert recorded_paths(prefix) == {name: [expected]}
    attrs = {i: r["attributes"]["starcoder_overlap"] for i, r in _docs(Path(prefix, expected, "sub")).items()}
    assert attrs["q-clean"] == [] and attrs["q-edited"] == []
    [(start, end, score)] = attrs["q-copied"]
    assert dev[1]["text"][int(start) : int(end)] == CODE[0] and score == 1.0
    again = summary(run_marin_script("overlap", prefix))
    assert (again["ran"], again["cached"]) == (0, 1)


# ------------------------------------------------------------------------------------------
# tests/integration_test.py


def write_integration_inputs(root: Path) -> dict[str, list[str]]:
    """``tests/quickstart-data/{pos,neg}`` (HTML pages as Dolma records, FineWeb-style url metadata)
    and ``tests/tokenizer`` (a byte-level BPE trained on the pages' words)."""
    from marin_assets.experiments.sample_data import SampleConfig, generate_drop
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    records, truth = generate_drop("drop-001", SampleConfig(docs_per_drop=160))
    split: dict[str, list[dict]] = {"pos": [], "neg": []}
    for rec in records:
        url = rec["metadata"]["url"]
        doc = {
            "id": rec["id"],
            "text": rec["text"],
            "source": "synthetic",
            "metadata": {"fineweb_metadata": {"url": url}},
        }
        split["pos" if truth["labels"][rec["id"]] == "hq" else "neg"].append(doc)
    for kind, docs in split.items():
        half = len(docs) // 2
        _write_jsonl_gz(root / f"tests/quickstart-data/{kind}/part-0.jsonl.gz", docs[:half])
        _write_jsonl_gz(root / f"tests/quickstart-data/{kind}/part-1.jsonl.gz", docs[half:])
    tokenizer = build_fast_tokenizer(
        [r["text"] for r in records], vocab_size=512, special_tokens=["<s>", "</s>", "<pad>", "<unk>"]
    )
    tokenizer.save_pretrained(root / "tests/tokenizer")
    return {kind: [d["id"] for d in docs] for kind, docs in split.items()}


@pytest.mark.slow
def test_integration_pipeline_html_to_trained_model_and_reruns_cached(prefix):
    root = Path(prefix).parent
    ids = write_integration_inputs(root)
    start = time.monotonic()
    first = run_marin_script("integration", prefix, timeout=600)
    seconds = time.monotonic() - start
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-5000:]
    assert summary(first)["ran"] == 9 and seconds < 600
    recorded = recorded_paths(prefix)
    # Marin's rule on what the script versions: the method (plain paths are not versioned), and the
    # classifier's two inputs as DEP[0], DEP[1].
    hq_v = {"name": "quickstart-tests/hq-transformed", "config": {"extract_method": "readability"}, "dependencies": []}
    lq_v = {**hq_v, "name": "quickstart-tests/lq-transformed"}
    inputs = {"datasets.[0].input_doc_path": "DEP[0]", "datasets.[1].input_doc_path": "DEP[1]"}
    clf_v = {"name": "quickstart-tests/quality-classifier", "config": inputs, "dependencies": [hq_v, lq_v]}
    assert (marin_hash(hq_v), marin_hash(lq_v), marin_hash(clf_v)) == ("993109", "988062", "d38812")
    for version in (hq_v, lq_v, clf_v):
        assert recorded[version["name"]] == [f"{version['name']}-{marin_hash(version)}"]
    paths = {name.rsplit("/", 1)[-1]: Path(prefix, rels[0]) for name, rels in recorded.items()}
    assert set(paths) == {
        "hq-transformed", "lq-transformed", "quality-classifier", "hq-inference", "lq-inference",
        "dedupe", "consolidate", "tokenized", "train",
    }  # fmt: skip

    # html_to_md: Marin's layout (same relative file names) and markdown with the page title first.
    hq = _docs(paths["hq-transformed"])
    assert sorted(p.name for p in paths["hq-transformed"].glob("*.jsonl.gz")) == ["part-0.jsonl.gz", "part-1.jsonl.gz"]
    assert set(hq) <= set(ids["pos"]) and len(hq) >= 0.9 * len(ids["pos"])
    assert all(d["format"] == "md" and d["text"].startswith("# ") for d in hq.values())
    # fastText: model.bin + report; inference: one attribute record per document, both labels.
    assert (paths["quality-classifier"] / "model.bin").stat().st_size > 0
    report = json.loads((paths["quality-classifier"] / "report.json").read_text())
    assert report["labels"] == {"hq": len(hq), "lq": len(_docs(paths["lq-transformed"]))}
    scores = {i: r["attributes"]["quickstart-fasttext-quality-hq"] for i, r in _docs(paths["hq-inference"]).items()}
    assert set(scores) == set(hq) and all(set(s) == {"__label__hq", "__label__lq"} for s in scores.values())
    # dedupe + consolidate: kept documents are hq documents with score >= 0.1, duplicate spans cut.
    dup = {i: r["attributes"]["duplicate_text"] for i, r in _docs(paths["dedupe"]).items()}
    assert set(dup) == set(hq) and any(dup.values())
    kept = _docs(paths["consolidate"])
    assert kept and all(scores[i]["__label__hq"] >= 0.1 for i in kept)
    for doc_id, spans in dup.items():
        if doc_id in kept:
            for s, e, _ in spans:
                assert hq[doc_id]["text"][int(s) : int(e)] not in kept[doc_id]["text"].split("\n")
    # Levanter trained 2 steps and exported HF checkpoints (hf_save_steps=1).
    trained = json.loads((paths["train"] / "train_summary.json").read_text())
    assert trained["num_train_steps"] == 2 and trained["hf_exports"]
    assert all(p.name.startswith("step-") for p in (paths["train"] / "hf").iterdir())

    again = summary(run_marin_script("integration", prefix, timeout=600))
    assert (again["ran"], again["cached"]) == (0, 9)

    # Every published file names published folders: no staging path in any text, JSON or YAML file
    # (summaries, stats, Levanter's configs, HF configs, .executor_*, the experiment records).
    assert files_naming_a_staging_folder(prefix) == []
    assert yaml.safe_load((paths["train"] / "train_config.yaml").read_text())["trainer"]["checkpointer"][
        "base_path"
    ] == str(paths["train"] / "checkpoints")
    assert trained["output_path"] == str(paths["train"]) and trained["hf_export"].startswith(str(paths["train"]))


# ------------------------------------------------------------------------------------------
# tutorials/train_tiny_sweep_tpu.py with ResourceConfig.with_cpu()


@pytest.mark.slow
def test_with_cpu_sweep_trains_each_point_and_reruns_cached(prefix):
    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    root = Path(prefix).parent
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]
    texts = [" ".join(words[(i * 3 + j) % len(words)] for j in range(80)) + f" doc {i}." for i in range(200)]
    _write_jsonl_gz(root / "local_docs/part-0.jsonl.gz", [{"text": t} for t in texts])
    build_fast_tokenizer(texts, vocab_size=300, special_tokens=["<s>", "</s>", "<pad>", "<unk>"]).save_pretrained(
        root / "local_tokenizer"
    )
    first = run_marin_script("cpu_sweep", prefix, timeout=600)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-5000:]
    assert summary(first)["ran"] == 3  # the tokenize step and two training runs
    runs = {n: rels for n, rels in recorded_paths(prefix).items() if n.startswith("checkpoints/")}
    assert sorted(runs) == [
        "checkpoints/tutorial-cpu-nano-sweep-lr0.0003-wd0.1",
        "checkpoints/tutorial-cpu-nano-sweep-lr0.001-wd0.1",
    ]
    for rels in runs.values():
        trained = json.loads((Path(prefix, rels[0]) / "train_summary.json").read_text())
        assert trained["num_train_steps"] == 2 and trained["hf_exports"]
    again = summary(run_marin_script("cpu_sweep", prefix, timeout=600))
    assert (again["ran"], again["cached"]) == (0, 3)


# ------------------------------------------------------------------------------------------
# train_test_overlap/train_test_total.py (DedupMode era): single-file input and source


def test_train_test_overlap_mode_reads_single_files_and_pins_marins_hash(prefix):
    import zstandard

    root = Path(prefix).parent
    eval_q = "Which of the following is a prime number: four, six, nine, eleven, fifteen, twenty or thirty?"
    corpus = [
        {"id": "c-copy", "text": f"intro line of a web page\n{eval_q}"},
        {"id": "c-clean", "text": "nothing in common with the evaluation set in this short document"},
        {"id": "c-five", "text": "quiz: is it four, six, nine, eleven, fifteen?"},  # one shared 5-gram only
    ]
    (root / "documents").mkdir(parents=True, exist_ok=True)
    with gzip.open(root / "documents/corpus.json.gz", "wt") as handle:  # one .json.gz file, not a folder
        handle.writelines(json.dumps(r) + "\n" for r in corpus)

    first = run_marin_script("overlap_mode", prefix)
    assert first.returncode == 0, first.stderr[-3000:]
    eval_version = {"name": "train_test_overlap/eval/mmlu", "config": {"name": "mmlu"}, "dependencies": []}
    name = "train_test_overlap/dolma/total/corpus"
    version = {
        "name": name,
        "config": {"decontaminate_source": "DEP[0]/mmlu.jsonl.zst"},
        "dependencies": [eval_version],
    }
    assert (marin_hash(eval_version), marin_hash(version)) == ("b673ce", "c0c1f9")
    out = Path(prefix, f"{name}-{marin_hash(version)}")
    assert recorded_paths(prefix)[name] == [f"{name}-{marin_hash(version)}"]
    eval_file = Path(prefix, f"train_test_overlap/eval/mmlu-{marin_hash(eval_version)}", "mmlu.jsonl.zst")
    assert zstandard.ZstdDecompressor().decompress(eval_file.read_bytes(), max_output_size=1 << 20)

    def spans(n: int) -> dict[str, list]:
        # The attribute file takes the input file's name, below <output>/<n>/.
        records = read_jsonl_gz(str(out / str(n) / "corpus.json.gz"))
        return {r["id"]: r["attributes"][f"ngram_overlap_{n}"] for r in records}

    five, ten = spans(5), spans(10)
    line = corpus[0]["text"].index(eval_q)
    assert [s[:2] for s in five["c-copy"]] == [[line, line + len(eval_q)]] == [s[:2] for s in ten["c-copy"]]
    assert five["c-clean"] == ten["c-clean"] == [] and ten["c-five"] == []
    assert five["c-five"] and five["c-five"][0][2] < 1.0  # shares one 5-gram: marked with its share
    again = summary(run_marin_script("overlap_mode", prefix))
    assert (again["ran"], again["cached"]) == (0, 2)
