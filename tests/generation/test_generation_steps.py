"""Generation as steps (``marin.generation``): batch generation over a dataset to JSON lines and a forward
pass's log-probabilities, on a tiny Llama built here from the project's own tokenizer (``transformers`` on
CPU), run through the engine; resumed per shard; bad records and bad templates reported, not crashed on."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from marin_assets.execution.runner import run_steps
from marin_assets.execution.step import ExecutorStep, this_output_path
from marin_assets.execution.versioning import StepGraph
from tests.generation.tiny_lm import build_tiny_lm

TEXTS = [f"Record {i}: the cat sat on the mat while the dog slept near door {i}." for i in range(24)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    return str(build_tiny_lm(tmp_path_factory.mktemp("lm") / "model", TEXTS))


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture
def documents(tmp_path) -> Path:
    root = tmp_path / "docs"
    _write(root / "a" / "part-0.jsonl.gz", [{"id": f"a{i}", "text": t} for i, t in enumerate(TEXTS[:5])])
    _write(
        root / "b" / "part-1.jsonl.gz",
        [{"id": "b0", "text": TEXTS[5]}, {"id": "bad", "text": None}, {"id": "b1", "text": TEXTS[6]}],
    )
    return root


def test_generation_step_writes_every_record_with_its_generated_text_and_resumes_per_shard(
    tiny_model, documents, prefix
):
    from marin.generation.inference import TextGenerationInferenceConfig, run_inference

    step = ExecutorStep(
        name="documents/generated",
        fn=run_inference,
        config=TextGenerationInferenceConfig(
            input_path=str(documents),
            output_path=this_output_path(),
            model_name=tiny_model,
            engine_kwargs={},
            generation_kwargs={"max_tokens": 6, "temperature": 0.0},
            template="Summarize: {example}\n",
            generated_text_column_name="generated_text",
            save_templated_prompt=True,
            output_filetype_override="jsonl.gz",
            batch_size=2,
        ),
    )
    report = run_steps([step], prefix)
    assert [o.action for o in report.outcomes] == ["ran"]
    out = Path(StepGraph([step], prefix).resolved(step).output_path)
    a, b = _read(out / "a" / "part-0.jsonl.gz"), _read(out / "b" / "part-1.jsonl.gz")
    assert [r["id"] for r in a] == [f"a{i}" for i in range(5)] and [r["id"] for r in b] == ["b0", "b1"]
    assert all(isinstance(r["generated_text"], str) for r in a + b)
    assert a[0]["prompt"] == f"Summarize: {TEXTS[0]}\n" and a[0]["text"] == TEXTS[0]
    quarantined = [json.loads(line) for line in (out / "quarantine" / "b__part-1.jsonl").read_text().splitlines()]
    assert [(q["id"], q["reason"], q["line"]) for q in quarantined] == [("bad", "no_prompt_text", 2)]
    meta = json.loads((out / ".executor_metadata.json").read_text())
    assert meta["backend"] == "transformers" and meta["documents_out"] == 7 and meta["quarantined"] == 1
    assert meta["generated_tokens"] > 0

    # Greedy generation is deterministic: a second attempt that lost one finished file redoes that file
    # only, with the same text, and keeps the other.
    kept = (out / "a" / "part-0.jsonl.gz").stat().st_mtime_ns
    (out / "b" / "part-1.jsonl.gz").unlink()
    again = run_inference(TextGenerationInferenceConfig(**{**step.config.__dict__, "output_path": str(out)}))
    assert again["shards_resumed"] == 1 and again["documents_out"] == 2
    assert (out / "a" / "part-0.jsonl.gz").stat().st_mtime_ns == kept
    assert _read(out / "b" / "part-1.jsonl.gz") == b


def test_logits_step_gives_each_tokens_log_probability_and_top_logits(tiny_model, documents, tmp_path):
    from marin.generation.logits import TextLogitsConfig, compute_logits

    book = tmp_path / "book.txt"
    book.write_text(" ".join(TEXTS))
    meta = compute_logits(
        TextLogitsConfig(
            model_name=tiny_model, input_path=str(book), output_path=str(tmp_path / "out"), span_chars=200,
            max_length=64, logits_top_k=3,
        )
    )  # fmt: skip
    spans = _read(tmp_path / "out" / "book.jsonl.gz")
    assert len(spans) == math.ceil(len(book.read_text()) / 200) == meta["documents_out"]
    for span in spans:
        assert len(span["token_logprobs"]) == span["num_tokens"] - 1 == len(span["input_ids"]) - 1
        assert all(lp <= 0 for lp in span["token_logprobs"])
        assert span["sum_logprob"] == pytest.approx(sum(span["token_logprobs"]), abs=1e-3)
        assert len(span["logits"]["ids"]) == span["num_tokens"] and len(span["logits"]["ids"][0]) == 3

    full = compute_logits(
        TextLogitsConfig(model_name=tiny_model, input_path=str(documents), output_path=str(tmp_path / "full"))
    )
    assert full["documents_out"] == 7 and full["quarantined"] == 1
    record = _read(tmp_path / "full" / "a" / "part-0.jsonl.gz")[0]
    # Marin's column: every position's full logits, whose log-softmax at the next token is its log-probability.
    logits = record["logits"]
    row = logits[0]
    top = max(row)
    logsumexp = top + math.log(sum(math.exp(v - top) for v in row))
    assert row[record["input_ids"][1]] - logsumexp == pytest.approx(record["token_logprobs"][0], abs=1e-3)


def test_a_bad_template_or_a_missing_model_fails_with_one_line_before_any_shard(documents, tmp_path, tiny_model):
    from marin.generation.inference import TextGenerationInferenceConfig, run_inference
    from marin.generation.llm_generation import ModelUnavailableError
    from marin.generation.pipeline import TemplateError

    def config(**changes):
        base = dict(input_path=str(documents), output_path=str(tmp_path / "out"), model_name=tiny_model,
                    engine_kwargs={}, generation_kwargs={"max_tokens": 2}, template="{example}")  # fmt: skip
        return TextGenerationInferenceConfig(**{**base, **changes})

    with pytest.raises(TemplateError, match=r"\{example\}"):
        run_inference(config(template="Grade {example} on {scale}"))
    with pytest.raises(ValueError, match="exactly one"):
        run_inference(config(template_path=str(tmp_path / "t.txt")))
    with pytest.raises(ModelUnavailableError, match="no-such-org/no-such-model") as error:
        run_inference(config(model_name="no-such-org/no-such-model"))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out" / "a").exists()
