"""The curation stages under Marin's names and signatures, on small hand-made inputs: layouts
(mirrored relative paths), attribute schemas, filter semantics and the errors for what cannot run."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from pathlib import Path

import pytest

from marin_assets.classifiers.utils import DatasetConfig, labelled_documents
from marin_assets.core.io import read_jsonl_gz
from marin_assets.processing.classification.consolidate import (
    ConsolidateConfig,
    FilterConfig,
    FilterType,
    MissingAttributeError,
    consolidate,
)
from marin_assets.processing.classification.dedupe import DedupeConfig, NGramConfig, dedupe
from marin_assets.processing.classification.fasttext.train_fasttext import TrainFasttextClassifierConfig, train
from marin_assets.processing.classification.inference import InferenceConfig, run_inference
from marin_assets.schemas.web.convert import HtmlToMarkdownConfig, ResiliparseConfig, TrafilaturaConfig
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin_assets.utilities.ray_utils import is_local_ray_cluster
from marin_assets.utils import fsspec_glob, is_in_ci, rebase_file_path
from marin_assets.web.convert import convert_page

PAGE = (
    "<html><head><title>Cats</title></head><body><nav><a href='/'>Home</a> | <a href='/about'>About</a></nav>"
    "<article><h2>Why cats sleep</h2><p>Cats sleep for most of the day because hunting takes a lot of energy "
    "and <a href='/energy'>rest</a> restores it.</p><ol><li>The first reason is that hunting at night needs a lot "
    "of energy.</li><li>The second reason is that a warm sofa is a comfortable place to sleep.</li></ol>"
    "<p>Kittens sleep even longer than adult cats, up to twenty hours on some days of the week.</p></article>"
    "<footer>Copyright 2024 Cats Inc</footer></body></html>"
)


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def _read(path: Path) -> list[dict]:
    return list(read_jsonl_gz(str(path)))


def test_convert_page_methods():
    md = convert_page(PAGE, "https://cats.example/a/b", "readability", HtmlToMarkdownConfig.default_config())
    assert md["title"] == "Cats" and md["url"] == "https://cats.example/a/b"
    assert md["content"].startswith("# Cats\n\n## Why cats sleep\n\n")
    assert "[rest](https://cats.example/energy)" in md["content"] and "1. The first reason is" in md["content"]
    assert "Copyright" not in md["content"] and "About" not in md["content"]
    no_links = convert_page(PAGE, None, "readability", HtmlToMarkdownConfig(include_links=False))["content"]
    assert "and rest restores it" in no_links and "](" not in no_links
    plain = convert_page(PAGE, None, "resiliparse", ResiliparseConfig(preserve_formatting=True))["content"]
    assert plain.startswith("Why cats sleep\n\nCats sleep") and "#" not in plain
    titled = convert_page(PAGE, None, "resiliparse", ResiliparseConfig(prepend_title=True))["content"]
    assert titled.startswith("Cats\n\n")
    with pytest.raises(ValueError, match="Invalid extract_method"):
        convert_page(PAGE, None, "boilerpipe")
    with pytest.raises(ValueError, match="takes a ResiliparseConfig"):
        convert_page(PAGE, None, "resiliparse", HtmlToMarkdownConfig())
    with pytest.raises(ImportError, match="trafilatura"):
        convert_page(PAGE, None, "trafilatura", TrafilaturaConfig())


def test_html_to_md_mirrors_relative_paths_with_marins_defaults(tmp_path):
    records = [
        {"id": "a", "text": PAGE, "source": "s", "metadata": {"fineweb_metadata": {"url": "https://cats.example/"}}},
        {"id": "b", "text": "<html><body></body></html>", "source": "s", "metadata": {}},
    ]
    _write(tmp_path / "in/x/one.jsonl.gz", records[:1])
    _write(tmp_path / "in/y/one.jsonl.gz", records[1:])
    assert SimpleHtmlToMdConfig("i", "o").extract_method == "readability"
    meta = html_to_md(SimpleHtmlToMdConfig(str(tmp_path / "in"), str(tmp_path / "out")))
    [doc] = _read(tmp_path / "out/x/one.jsonl.gz")
    assert doc["format"] == "md" and doc["text"].startswith("# Cats") and "(https://cats.example/energy)" in doc["text"]
    assert _read(tmp_path / "out/y/one.jsonl.gz") == []
    # Quarantine names carry the folder, so equal file names in two folders do not collide.
    [row] = [json.loads(line) for line in (tmp_path / "out/quarantine/y__one.jsonl").read_text().splitlines()]
    assert (row["id"], row["reason"], row["file"]) == ("b", "no_text", "one.jsonl.gz")
    assert (meta["documents_in"], meta["documents_out"], meta["quarantined"]) == (2, 1, 1)
    with pytest.raises(ValueError, match="takes a ResiliparseConfig"):
        html_to_md(SimpleHtmlToMdConfig(str(tmp_path / "in"), str(tmp_path / "bad"), "resiliparse"))


def _labelled_folders(root: Path) -> tuple[str, str]:
    good = [f"the committee reviewed the proposal {i} and approved the budget for the library" for i in range(60)]
    spam = [f"BUY NOW cheap pills {i} click here win money free casino bonus" for i in range(60)]
    _write(root / "hq/part.jsonl.gz", [{"id": f"g{i}", "text": t} for i, t in enumerate(good)])
    _write(root / "lq/part.jsonl.gz", [{"id": f"s{i}", "text": t} for i, t in enumerate(spam)])
    return str(root / "hq"), str(root / "lq")


def test_fasttext_train_then_inference_in_marins_schema(tmp_path):
    hq, lq = _labelled_folders(tmp_path)
    sampled = list(labelled_documents(DatasetConfig(hq, "hq", sampling_rate=0.5, max_sample_size=10), seed=3))
    assert len(sampled) == 10 and sampled == list(labelled_documents(DatasetConfig(hq, "hq", 0.5, 10), seed=3))
    model = str(tmp_path / "model")
    meta = train(
        TrainFasttextClassifierConfig(
            output_path=model,
            datasets=[DatasetConfig(hq, "hq"), DatasetConfig(lq, "lq")],
            fasttext_args={"epoch": 10, "lr": 0.5, "dim": 10, "thread": 1},
            val_frac=0.2,
        )
    )
    assert meta["holdout_accuracy"] == 1.0 and os.path.getsize(f"{model}/model.bin") > 0
    assert Path(f"{model}/data.train").read_text().startswith("__label__")
    out = tmp_path / "attrs"
    run_inference(InferenceConfig(input_path=lq, model_name=model, attribute_name="q", output_path=str(out)))
    rows = _read(out / "part.jsonl.gz")
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(60)]
    assert all(set(r["attributes"]["q"]) == {"__label__hq", "__label__lq"} for r in rows)
    assert all(r["attributes"]["q"]["__label__lq"] > 0.5 for r in rows)
    with pytest.raises(ValueError, match="model_type 'bert' is not available"):
        run_inference(InferenceConfig(lq, model, "q", model_type="bert", output_path=str(tmp_path / "x")))
    with pytest.raises(FileNotFoundError, match="no fastText model"):
        run_inference(InferenceConfig(lq, str(tmp_path / "none"), "q", output_path=str(tmp_path / "y")))


def _consolidate_inputs(tmp_path: Path) -> tuple[str, str, str]:
    docs = [{"id": f"d{i}", "text": f"keep line {i}\nshared paragraph\nend {i}", "extra": i} for i in range(4)]
    _write(tmp_path / "docs/sub/a.jsonl.gz", docs)
    scores = [0.9, 0.2, 0.6, 0.05]
    _write(
        tmp_path / "quality/sub/a.jsonl.gz",
        [{"id": d["id"], "attributes": {"q": {"__label__hq": s}}} for d, s in zip(docs, scores, strict=True)],
    )
    line = docs[0]["text"].index("shared")
    _write(
        tmp_path / "dedup/sub/a.jsonl.gz",
        [
            {"id": d["id"], "attributes": {"duplicate_text": [[line, line + 16, 1.0]] if i else [], "fuzzy": i == 2}}
            for i, d in enumerate(docs)
        ],
    )
    return str(tmp_path / "docs"), str(tmp_path / "quality"), str(tmp_path / "dedup")


def test_consolidate_filters(tmp_path):
    docs, quality, dedup = _consolidate_inputs(tmp_path)
    filters = [
        FilterConfig(FilterType.CLASSIFY, quality, "q", label="__label__hq", threshold=0.5),
        FilterConfig("remove_docs", dedup, "fuzzy"),
        FilterConfig("remove_spans", dedup, "duplicate_text"),
    ]
    meta = consolidate(ConsolidateConfig(docs, str(tmp_path / "out"), filters))
    kept = _read(tmp_path / "out/sub/a.jsonl.gz")
    assert [d["id"] for d in kept] == ["d0"]  # d1, d3 below 0.5; d2 a fuzzy duplicate
    assert kept[0] == {"id": "d0", "text": "keep line 0\nshared paragraph\nend 0", "extra": 0}
    assert (meta["removed_by_q"], meta["removed_by_fuzzy"], meta["documents_out"]) == (2, 1, 1)

    upper = [FilterConfig("classify", quality, "q", label="__label__hq", upper_threshold=0.5, reverse=True)]
    consolidate(ConsolidateConfig(docs, str(tmp_path / "rev"), upper))
    assert [d["id"] for d in _read(tmp_path / "rev/sub/a.jsonl.gz")] == ["d0", "d2"]

    spans = [FilterConfig("remove_spans", dedup, "duplicate_text")]
    consolidate(ConsolidateConfig(docs, str(tmp_path / "spans"), spans))
    texts = [d["text"] for d in _read(tmp_path / "spans/sub/a.jsonl.gz")]
    assert texts[0].count("shared") == 1 and texts[1] == "keep line 1\n\nend 1"

    half = [FilterConfig("classify", quality, "q", label="__label__hq", keep_fraction=0.5)]
    consolidate(ConsolidateConfig(docs, str(tmp_path / "half"), half))
    assert [d["id"] for d in _read(tmp_path / "half/sub/a.jsonl.gz")] == ["d0", "d2"]

    # A missing attribute file fails the step (never an unfiltered output published as SUCCESS) ...
    missing = [FilterConfig("classify", str(tmp_path / "nowhere"), "q", label="__label__hq", threshold=0.5)]
    with pytest.raises(MissingAttributeError, match=r"no attribute file .*nowhere.*filter 'q'"):
        consolidate(ConsolidateConfig(docs, str(tmp_path / "miss"), missing))
    assert not (tmp_path / "miss/sub/a.jsonl.gz").exists()
    # ... unless the filter opts in explicitly: then skipped and counted, as Marin does.
    optional = [dataclasses.replace(missing[0], missing_ok=True)]
    meta = consolidate(ConsolidateConfig(docs, str(tmp_path / "miss_ok"), optional))
    assert meta["missing_attribute_files"] == 1 and meta["documents_out"] == 4
    for bad, message in (
        (FilterConfig("keep", quality, "q"), "expected one of"),
        (FilterConfig("classify", quality, "q"), "needs threshold"),
        (FilterConfig("classify", quality, "q", threshold=0.1, lower_threshold=0.2), "not both"),
    ):
        with pytest.raises(ValueError, match=message):
            consolidate(ConsolidateConfig(docs, str(tmp_path / "bad"), [bad]))


def test_dedupe_on_its_own_and_errors(tmp_path):
    para = "this paragraph is long enough to count as a duplicate paragraph here"
    docs = [
        {"id": "a", "text": f"intro one\n{para}"},
        {"id": "b", "text": f"intro two, different\n{para}"},
    ]
    _write(tmp_path / "in/p/x.jsonl.gz", docs[:1])
    _write(tmp_path / "in/q/x.jsonl.gz", docs[1:])
    meta = dedupe(DedupeConfig(str(tmp_path / "in"), str(tmp_path / "out")))
    a = _read(tmp_path / "out/p/x.jsonl.gz")[0]["attributes"]
    b = _read(tmp_path / "out/q/x.jsonl.gz")[0]["attributes"]
    assert a["duplicate_text"] == [] and b["fuzzy_duplicate"] == 0
    start = docs[1]["text"].index(para)
    assert b["duplicate_text"] == [[start, start + len(para), 1.0]] and meta["paragraph_duplicates"] == 1
    with pytest.raises(ValueError, match="needs decontaminate_path"):
        dedupe(DedupeConfig(str(tmp_path / "in"), str(tmp_path / "o2"), decontaminate=True))
    with pytest.raises(ValueError, match="applies to decontamination"):
        dedupe(DedupeConfig(str(tmp_path / "in"), str(tmp_path / "o3"), ngram=NGramConfig()))
    # Several n-gram lengths: one attribute tree per length.
    dedupe(
        DedupeConfig(
            str(tmp_path / "in/q"),
            str(tmp_path / "overlap"),
            attribute_name="ov",
            ngram=NGramConfig(ngram_length=[3, 50], overlap_threshold=0.5),
            decontaminate=True,
            decontaminate_path=str(tmp_path / "in/p"),
        )
    )
    three = _read(tmp_path / "overlap/3/x.jsonl.gz")[0]["attributes"]["ov_3"]
    fifty = _read(tmp_path / "overlap/50/x.jsonl.gz")[0]["attributes"]["ov_50"]
    assert [s[:2] for s in three] == [[start, start + len(para)]] and [s[:2] for s in fifty] == [three[0][:2]]


def test_utils(tmp_path, monkeypatch):
    assert rebase_file_path("gs://b/in", "gs://b/in/x/y.jsonl.gz", "gs://b/out") == "gs://b/out/x/y.jsonl.gz"
    assert rebase_file_path("/in", "/in/x/y.jsonl.gz", "/out", ".parquet") == "/out/x/y.parquet"
    with pytest.raises(ValueError, match="is not below"):
        rebase_file_path("/in", "/elsewhere/y", "/out")
    (tmp_path / "a/b").mkdir(parents=True)
    (tmp_path / "a/b/c.jsonl.gz").write_bytes(b"")
    assert fsspec_glob(f"{tmp_path}/**/*.jsonl.gz") == [f"{tmp_path}/a/b/c.jsonl.gz"]
    for name in ("CI", "GITHUB_ACTIONS", "BUILDKITE", "GITLAB_CI"):
        monkeypatch.delenv(name, raising=False)
    assert not is_in_ci()
    monkeypatch.setenv("CI", "true")
    assert is_in_ci()
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert not is_local_ray_cluster()
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert is_local_ray_cluster()


def test_create_dataset_labels_documents_from_their_attributes(tmp_path):
    from marin_assets.classifiers.utils import CreateDatasetConfig, create_dataset
    from marin_assets.execution import ExecutorStep, executor_main, this_output_path, versioned

    docs, attrs = tmp_path / "documents", tmp_path / "attributes"
    for shard in ("a/shard-0.jsonl.gz", "b/shard-1.jsonl.gz"):
        ids = [f"{shard[0]}{i}" for i in range(50)]
        _write(docs / shard, [{"id": i, "text": f"text of {i}", "source": "web"} for i in ids])
        _write(attrs / shard, [{"id": i, "attributes": {"score": int(i[1:]) / 50}} for i in ids])
    _write(docs / "c/no-attrs.jsonl", [{"id": "x"}])  # another filetype: not read

    def label(doc, attributes):
        return "hq" if attributes[0]["attributes"]["score"] >= 0.5 else "lq"

    out = tmp_path / "dataset"
    config = CreateDatasetConfig(str(docs), str(out), label_func=label, input_attr_paths=[str(attrs)], seed=3)
    counts = create_dataset(config)
    data = out / "data" / str(docs).lstrip("/") / "data.jsonl.gz"  # Marin's place for the merged file
    examples = _read(data)
    assert counts["examples"] == len(examples) == 100 and counts["shards"] == 2
    assert examples[0] == {"text": "text of a0", "label": "lq"}
    assert sum(e["label"] == "hq" for e in examples) == 50

    # A sample is a property of the documents and the seed: the same ids whatever the file order.
    half = CreateDatasetConfig(str(docs), str(tmp_path / "half"), sampling_rate=0.5, seed=3, columns_to_keep=["id"])
    create_dataset(half)
    kept = {e["id"] for e in _read(tmp_path / "half" / "data" / str(docs).lstrip("/") / "data.jsonl.gz")}
    assert 30 < len(kept) < 70
    capped = CreateDatasetConfig(str(docs), str(tmp_path / "cap"), sampling_rate=0.5, seed=3, max_sample_size=10)
    create_dataset(capped)
    assert len(_read(tmp_path / "cap" / "data" / str(docs).lstrip("/") / "data.jsonl.gz")) == 10

    # One output file per document shard, same relative paths.
    per_shard = CreateDatasetConfig(str(docs), str(tmp_path / "sharded"), merge_dataset_shards=False)
    create_dataset(per_shard)
    base = tmp_path / "sharded" / "data" / str(docs).lstrip("/")
    assert len(_read(base / "a/shard-0.jsonl.gz")) == len(_read(base / "b/shard-1.jsonl.gz")) == 50

    # Attributes that are not co-sharded: the file and line are named, nothing is written.
    _write(attrs / "b/shard-1.jsonl.gz", [{"id": "zzz", "attributes": {"score": 1.0}}])
    broken = CreateDatasetConfig(str(docs), str(tmp_path / "broken"), label_func=label, input_attr_paths=[str(attrs)])
    with pytest.raises(ValueError, match=r"attributes/b/shard-1\.jsonl\.gz:1: attribute record of id 'zzz'"):
        create_dataset(broken)
    assert not (tmp_path / "broken").exists() or not list((tmp_path / "broken").rglob("*.jsonl.gz"))

    # As Marin's scripts use it: a step whose label function travels in its config.
    step = ExecutorStep(
        "classifiers/dataset",
        create_dataset,
        CreateDatasetConfig(str(docs), this_output_path(), label_func=lambda d, a: "any", seed=versioned(1)),
    )
    executor_main(steps=[step], argv=["--prefix", str(tmp_path / "prefix"), "--no_record"])
    (written,) = (tmp_path / "prefix" / "classifiers").glob("dataset-*/data/**/data.jsonl.gz")
    assert {e["label"] for e in _read(written)} == {"any"} and len(_read(written)) == 100
