"""The tokenizer step: trains a byte-level BPE that transformers and Levanter load."""

from __future__ import annotations

import gzip
import json

import pytest

from marin_assets.processing.tokenize.train_tokenizer import (
    BOS,
    EOS,
    TokenizerConfig,
    default_tokenizer,
    train_tokenizer,
)

pytestmark = pytest.mark.timeout(120)

TEXTS = [
    "Return the number of items in a container. The argument may be a sequence or a collection.",
    "Open file and return a stream. Raise OSError upon failure.",
    "Create a new dictionary with keys from iterable and values set to value.",
] * 40


def _write_docs(path, texts):
    path.mkdir(parents=True, exist_ok=True)
    with gzip.open(path / "docs-00000.jsonl.gz", "wt") as handle:
        for t in texts:
            handle.write(json.dumps({"text": t}) + "\n")
    # The engine's hidden files must be ignored when listing documents.
    (path / ".executor_status").write_text('{"status": "SUCCESS"}')


def test_tokenizer_loads_with_autotokenizer_and_levanter(tmp_path):
    from levanter.data.text import BatchTokenizer
    from transformers import AutoTokenizer

    _write_docs(tmp_path / "docs", TEXTS)
    out = tmp_path / "tok"
    meta = train_tokenizer(TokenizerConfig(input_paths=[str(tmp_path / "docs")], output_path=str(out), vocab_size=500))
    assert meta["documents"] == len(TEXTS)
    tok = AutoTokenizer.from_pretrained(str(out))
    assert tok.is_fast
    assert len(tok) == meta["vocab_size"] <= 500
    assert tok.bos_token == BOS and tok.eos_token == EOS
    assert tok.bos_token_id is not None and tok.eos_token_id is not None and tok.pad_token_id is not None
    text = "Return the number of items, e.g. 42 émojis ✓"
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text  # byte-level: lossless on unseen characters
    # Frequent words were merged: far fewer tokens than bytes.
    assert len(tok("Return the number of items in a container.")["input_ids"]) < 20
    # Levanter's tokenizing processor appends bos/eos with this tokenizer.
    batch = BatchTokenizer(tok)([{"text": "Open file and return a stream."}])
    assert batch[0]["input_ids"][0] == tok.bos_token_id and batch[0]["input_ids"][-1] == tok.eos_token_id


def test_tokenizer_step_versions_vocab_and_special_tokens():
    from marin_assets.execution.versioning import StepGraph

    a = default_tokenizer("t", "/data/docs", vocab_size=1000)
    b = default_tokenizer("t", "/data/docs", vocab_size=2000)
    c = default_tokenizer("t", "/data/docs", vocab_size=1000, special_tokens=("<s>", "</s>", "<pad>", "<unk>"))
    graph = StepGraph([a, b, c], "/prefix")
    paths = {graph.resolved(s).output_path for s in (a, b, c)}
    assert len(paths) == 3
    assert all(p.startswith("/prefix/tokenizers/t-") for p in paths)
