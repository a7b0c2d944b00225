"""The dedup stage's fast paths give exactly what their plain definitions give.

``hashed_paragraphs`` (one lower/encode/translate per text) against ``paragraph_spans`` +
``paragraph_hash`` per paragraph; ``signatures`` (one permutation at a time over a batch) against
MinHash written out per document in plain Python. Both decide which documents and paragraphs are
removed, so a difference here changes a drop's removals.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from marin_assets.processing.classification import minhash
from marin_assets.processing.classification.dedup_text import (
    _normalised_len,
    hashed_paragraphs,
    paragraph_hash,
    paragraph_spans,
    too_short,
)
from marin_assets.processing.classification.minhash import MinHashParams, signatures

TEXTS = [
    "",
    "\n\n",
    "Hello, World! A paragraph that is long enough to be indexed.\n\n  \t\nSecond LINE, with ÜNICODE.\n",
    "Kelvin \u212a and \u0130stanbul lower-case to ASCII letters: counted like k and i, long enough here",
    "lone surrogate \ud800 in the middle of a paragraph that is long enough to count",
    "ΣΑΣ final sigma ΟΔΟΣ, then enough ascii words to pass the length bar",
    "carriage\r\nreturns stay inside lines " * 5,
    "short\n" + "x" * 29 + "\n" + "y" * 30 + "\n\u00a0\u2003\n" + "numbers 12345 and words " * 3,
]


def _reference(text: str, min_chars: int, min_length: int, min_words: int) -> list[tuple[int, int, int]]:
    out = []
    for start, end in paragraph_spans(text):
        para = text[start:end]
        if _normalised_len(para) < min_chars or too_short(para, min_length, min_words):
            continue
        h = paragraph_hash(para)
        if h is not None:
            out.append((start, end, h))
    return out


@pytest.mark.parametrize("options", [(30, 0, 0), (0, 0, 0), (1, 40, 0), (5, 0, 6)])
def test_hashed_paragraphs_equal_the_per_paragraph_definition(options):
    for text in TEXTS:
        assert hashed_paragraphs(text, *options) == _reference(text, *options), text


def _plain_minhash(text: str, params: MinHashParams) -> list[int]:
    """MinHash of one document, one shingle and one permutation at a time (the module's definition)."""
    mask = (1 << 64) - 1
    data = text.lower().encode("utf-8", errors="replace")
    words = []
    i = 0
    while i < len(data):
        if not minhash._WORD_BYTE[data[i]]:
            i += 1
            continue
        j = i
        h = 0
        while j < len(data) and minhash._WORD_BYTE[data[j]]:
            h = (h + data[j] * pow(minhash._P, j - i, 1 << 64)) & mask
            j += 1
        words.append(int(minhash._mix(np.array([h ^ (j - i)], dtype=np.uint64))[0]))
        i = j
    if not words:
        return [0xFFFFFFFF] * params.num_perm
    n = min(params.ngram, len(words))
    shingles = set()
    for s in range(len(words) - n + 1):
        h = words[s]
        for t in range(1, n):
            h = (h * minhash._K_COMBINE + words[s + t]) & mask
        shingles.add(int(minhash._mix(np.array([h], dtype=np.uint64))[0]))
    a, b = minhash._perm_coefficients(params)
    return [min((((int(ak) * x + int(bk)) & mask) >> 32) for x in shingles) for ak, bk in zip(a, b, strict=True)]


@pytest.mark.parametrize("params", [MinHashParams(), MinHashParams(ngram=2, num_perm=8, bands=2, seed=7)])
def test_signatures_equal_minhash_written_out_per_document(params):
    rng = random.Random(3)
    vocab = ["alpha", "beta", "Gamma", "délta", "x", "42", "ñu", "the"]
    texts = TEXTS + [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 60))) for _ in range(40)]
    got = signatures(texts, params)
    assert got.dtype == np.uint32 and got.shape == (len(texts), params.num_perm)
    for row, text in zip(got, texts, strict=True):
        assert row.tolist() == _plain_minhash(text, params), text
