"""How dedup and decontamination read text: paragraphs, their normalised hashes, word n-grams.

A paragraph is a non-blank line. Normalised: lower case, every run of characters other than ASCII
letters and digits one space, trimmed; its hash is the first 8 bytes (little-endian) of the
BLAKE2b digest of that. Both workflows compare hashes, so a paragraph indexed by one drop and the
same paragraph read later always agree.
"""

from __future__ import annotations

import hashlib
import re

_NORMALISE = re.compile(r"[^0-9a-z]+")


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the non-empty lines of ``text``."""
    spans = []
    pos = 0
    for line in text.split("\n"):
        end = pos + len(line)
        if line.strip():
            spans.append((pos, end))
        pos = end + 1
    return spans


def paragraph_hash(paragraph: str) -> int | None:
    """64-bit hash of the normalised paragraph (None when it is empty after normalising)."""
    norm = _NORMALISE.sub(" ", paragraph.lower()).strip()
    if not norm:
        return None
    return int.from_bytes(hashlib.blake2b(norm.encode("utf-8"), digest_size=8).digest(), "little")


def _normalised_len(paragraph: str) -> int:
    return len(_NORMALISE.sub("", paragraph.lower()))


def too_short(paragraph: str, min_length: int, min_words: int) -> bool:
    """dolma's ``min_length`` / ``min_words``: such a paragraph is never marked."""
    return len(paragraph) < min_length or (min_words > 0 and len(paragraph.split()) < min_words)


# Bytes of a lower-cased, UTF-8 encoded text -> the bytes of its normalised form: ASCII letters and
# digits stay, newlines stay (they separate paragraphs), every other byte (non-ASCII included) is a
# space -- what ``_NORMALISE.sub(" ", text.lower())`` keeps, with runs of spaces left to ``split``.
_NORMALISE_BYTES = bytes(c if c in b"0123456789abcdefghijklmnopqrstuvwxyz\n" else 32 for c in range(256))


def hashed_paragraphs(
    text: str, min_paragraph_chars: int, min_length: int = 0, min_words: int = 0
) -> list[tuple[int, int, int]]:
    """``(start, end, paragraph_hash)`` of the paragraphs of ``text`` that dedup indexes.

    The same paragraphs and hashes as :func:`paragraph_spans` + :func:`paragraph_hash` (skipping
    those with fewer than ``min_paragraph_chars`` normalised characters, or ``too_short``), but the
    whole text is lower-cased, encoded and normalised in three calls instead of two regex passes
    per paragraph: this loop ran over every paragraph of every drop and was a third of the stage's
    CPU (a quarter of it now).
    """
    # ``lower`` maps characters one by one and never makes or removes a newline, and a newline
    # byte never occurs inside a multi-byte UTF-8 sequence: line i of ``normalised`` is line i of
    # ``text``, normalised. Lone surrogates become "?" (a separator, as for the regex).
    normalised = text.lower().encode("utf-8", "replace").translate(_NORMALISE_BYTES).split(b"\n")
    out = []
    pos = 0
    for line, norm in zip(text.split("\n"), normalised, strict=True):
        end = pos + len(line)
        # The normalised length counts letters and digits only; a line with none is blank or has no
        # words (paragraph_hash: None) and is never indexed.
        chars = len(norm) - norm.count(b" ")
        if chars and chars >= min_paragraph_chars and not too_short(line, min_length, min_words):
            digest = hashlib.blake2b(b" ".join(norm.split()), digest_size=8).digest()
            out.append((pos, end, int.from_bytes(digest, "little")))
        pos = end + 1
    return out


def words(paragraph: str) -> list[str]:
    return _NORMALISE.sub(" ", paragraph.lower()).split()


def ngram_hashes(words: list[str], n: int, stride: int) -> list[int]:
    """64-bit hashes of the ``n``-word n-grams of ``words``, every ``stride``-th (a short paragraph: one)."""
    if not words:
        return []
    grams = [words] if len(words) <= n else [words[i : i + n] for i in range(0, len(words) - n + 1, stride)]
    return [
        int.from_bytes(hashlib.blake2b(" ".join(g).encode("utf-8"), digest_size=8).digest(), "little") for g in grams
    ]
