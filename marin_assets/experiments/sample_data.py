"""Deterministic sample corpus of HTML pages, written as data drops into a landing zone.

The text comes from docstrings of the Python standard library (read with ``ast``), so it is real
English prose that exists offline on every machine. Pages come in two classes:

* high quality (``hq``): a title and several paragraphs of consecutive docstring sentences;
* low quality (``lq``): keyword stuffing, ALL CAPS shouting, short fragments, link farms.

Every page is wrapped in a site template with boilerplate (navigation, cookie banner, ads, footer)
that main-content extraction should remove. Planted on top, within a drop and across drops:
exact duplicates (same HTML, new id/url), near duplicates (~1% of words edited) and paragraph
duplicates (a paragraph quoted verbatim from an earlier page). A copy always comes after its
original in (drop id, file, line) order, so "keep the first" dedup keeps every original.

The ground truth of a drop (``<prefix>/ground_truth/<source>/<drop>.json``) lists every label and
every planted duplicate; tests assert against it, never against the stdlib version.

Page ``k`` of drop number ``d`` depends only on ``(seed, d, k)``, so a later drop regenerates the
originals of earlier drops it copies without reading them. All drops of one source must use the
same ``docs_per_drop``.

Drops are written as ``part-N.jsonl.gz`` or, with ``--format warc``, as ``part-N.warc.gz``
(HTTP response records written with FastWARC's WARC writer, ids = WARC-Record-IDs).

CLI: ``python -m marin_assets.experiments.sample_data --prefix DIR --drop drop-004 [--docs 400] [--format warc]``.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.step import validate_partition_key
from marin_assets.execution.storage import atomic_write_bytes, join_path
from marin_assets.experiments.docstring_corpus import iter_docstrings, python_files, stdlib_dir

DEFAULT_SOURCE = "sample-html"
DEFAULT_SEED = 1234
DEFAULT_DOCS = 400
SENTENCES_PER_SLOT = 24
# Slots of different drops never overlap: drop d owns slots [d * SLOT_STRIDE, (d + 1) * SLOT_STRIDE).
SLOT_STRIDE = 1_000_000

# Phrases that only ever appear in boilerplate; tests check none survive HTML->text extraction.
BOILERPLATE_MARKERS = (
    "Accept all cookies",
    "Subscribe to our newsletter",
    "All rights reserved",
    "Sponsored content",
    "Skip to main content",
)

_SITES = (
    ("docs.pyguide.example", "PyGuide"),
    ("learn.codebase.example", "CodeBase Learn"),
    ("wiki.devnotes.example", "DevNotes Wiki"),
    ("reference.stackdocs.example", "StackDocs Reference"),
)
_SPAM_KEYWORDS = (
    "cheap",
    "free download",
    "best price",
    "click here",
    "crack",
    "casino",
    "win now",
    "top 10",
    "discount",
    "limited offer",
    "make money fast",
    "hot deals",
)


@dataclass(frozen=True)
class SampleConfig:
    """Knobs of the generator (fractions are per drop)."""

    seed: int = DEFAULT_SEED
    docs_per_drop: int = DEFAULT_DOCS
    files_per_drop: int = 2
    lq_fraction: float = 0.35
    exact_dup_fraction: float = 0.03
    near_dup_fraction: float = 0.04
    para_dup_fraction: float = 0.03
    cross_exact_fraction: float = 0.02
    cross_near_fraction: float = 0.02
    # Fraction of words edited in a near duplicate (at least one edit): about one edit per 150
    # words keeps the word-5-gram Jaccard of a copy >= ~0.88, i.e. a "small edit".
    near_dup_edit_rate: float = 0.0067


@dataclass
class Page:
    """One generated page and what it is."""

    id: str
    html: str
    url: str
    label: str  # "hq" | "lq"
    kind: str  # original | exact_dup | near_dup | para_dup
    site: str
    paragraphs: list[str] = field(default_factory=list)
    of: str | None = None
    quoted_paragraph: str | None = None
    lq_style: str | None = None
    title: str = ""


# --------------------------------------------------------------------------------------------
# Text pool


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_CODEY = re.compile(r"(>>>|\.\.\.|[{}\[\]=<>]|::|__\w+__|\w+\(\))")


@functools.lru_cache(maxsize=2)
def sentence_pool(extra_dirs: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Unique prose sentences from stdlib docstrings (and ``extra_dirs``), in file order."""
    files = python_files(
        stdlib_dir(), {"test", "tests", "idlelib", "site-packages", "lib2to3", "__pycache__", "turtledemo"}
    )
    for extra in extra_dirs:
        files.extend(python_files(extra, {"tests", "test", "__pycache__"}))
    seen: set[str] = set()
    out: list[str] = []
    for doc in iter_docstrings(files):
        for para in re.split(r"\n\s*\n", doc):
            text = " ".join(para.split())
            for sentence in _SENTENCE_SPLIT.split(text):
                words = sentence.split()
                # Prose only: long enough, ends like a sentence, no code-ish tokens.
                if len(words) < 7 or len(words) > 60 or not sentence[0].isupper():
                    continue
                if not sentence.endswith((".", "!", "?")) or _CODEY.search(sentence):
                    continue
                key = re.sub(r"[^a-z]", "", sentence.lower())
                if key in seen:
                    continue
                seen.add(key)
                out.append(sentence)
    if len(out) < 500:
        raise RuntimeError(f"only {len(out)} docstring sentences found; is the Python stdlib source installed?")
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _pass_order(seed: int, pass_index: int, pool_size: int) -> tuple[int, ...]:
    """Sentence order of one pass over the pool: blocks of consecutive sentences, shuffled.

    Blocks keep neighbouring docstring sentences together (coherent prose); shuffling them per
    pass means two pages of different passes share at most a block by chance (no near-dups).
    """
    blocks = [list(range(i, min(i + _BLOCK, pool_size))) for i in range(0, pool_size, _BLOCK)]
    random.Random(f"{seed}:pass:{pass_index}").shuffle(blocks)
    return tuple(i for block in blocks for i in block)


_BLOCK = 4


def _slot_sentences(seed: int, slot: int, pool: tuple[str, ...]) -> list[str]:
    """The sentences reserved for one page slot: disjoint from every other slot of its pass."""
    per_pass = len(pool) // SENTENCES_PER_SLOT
    pass_index, within = divmod(slot, per_pass)
    order = _pass_order(seed, pass_index, len(pool))
    start = within * SENTENCES_PER_SLOT
    return [pool[i] for i in order[start : start + SENTENCES_PER_SLOT]]


def _vocabulary(pool: tuple[str, ...]) -> tuple[str, ...]:
    words = {w.strip(".,;:!?()'\"").lower() for s in pool[:4000] for w in s.split()}
    return tuple(sorted(w for w in words if w.isalpha() and 3 <= len(w) <= 12))


# --------------------------------------------------------------------------------------------
# Pages


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _wrap(title: str, body_html: str, site: tuple[str, str], rng: random.Random) -> str:
    """Put main content into a site template full of boilerplate."""
    domain, site_name = site
    nav = "".join(
        f'<li><a href="https://{domain}/{p.lower()}">{p}</a></li>'
        for p in ("Home", "Tutorials", "Reference", "Community", "Blog", "About")
    )
    ad_id = rng.randrange(10_000)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_esc(title)} - {site_name}</title>"
        "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments);}</script>"
        "<style>.ad{border:1px solid #ccc}</style></head><body>"
        f'<a class="skip-link" href="#main">Skip to main content</a>'
        f'<header class="site-header"><div class="logo">{site_name}</div><nav class="main-nav"><ul>{nav}</ul></nav>'
        '<form class="search" action="/search"><input type="text" name="q" placeholder="Search"></form></header>'
        '<div id="cookie-banner" class="cookie-consent"><p>We use cookies to personalise content and ads. '
        "By continuing you agree to our cookie policy.</p><button>Accept all cookies</button></div>"
        f'<div class="layout"><main id="main"><article class="content">{body_html}</article></main>'
        f'<aside class="sidebar"><div class="ad" id="ad-{ad_id}"><span>Sponsored content</span>'
        f'<a href="https://ads.example/{ad_id}">Upgrade your workflow today with CloudTools Pro</a></div>'
        '<div class="related"><h3>Related</h3><ul><li><a href="/r1">Related article</a></li>'
        '<li><a href="/r2">More tutorials</a></li></ul></div></aside></div>'
        '<footer class="site-footer"><div class="newsletter"><p>Subscribe to our newsletter for weekly tips.</p></div>'
        f"<p>Copyright 2024 {site_name}. All rights reserved.</p>"
        '<ul class="legal"><li><a href="/privacy">Privacy policy</a></li><li><a href="/terms">Terms of use</a></li></ul>'
        "</footer></body></html>"
    )


def _hq_body(title: str, paragraphs: list[str]) -> str:
    return f"<h1>{_esc(title)}</h1>" + "".join(f"<p>{_esc(p)}</p>" for p in paragraphs)


def _hq_paragraphs(seed: int, slot: int, pool: tuple[str, ...], rng: random.Random) -> list[str]:
    sentences = _slot_sentences(seed, slot, pool)
    n_paragraphs = rng.randint(3, 6)
    # Split the slot's sentences into paragraphs of 2-5 sentences.
    paragraphs: list[str] = []
    i = 0
    while len(paragraphs) < n_paragraphs and i < len(sentences):
        size = rng.randint(2, 5)
        paragraphs.append(" ".join(sentences[i : i + size]))
        i += size
    return paragraphs


def _title(rng: random.Random, paragraphs: list[str]) -> str:
    words = [w.strip(".,;:()") for w in paragraphs[0].split()[:8]]
    return " ".join(words[: rng.randint(3, 6)]).capitalize()


def _lq_page(rng: random.Random, vocab: tuple[str, ...], pool: tuple[str, ...]) -> tuple[str, str, str]:
    """(style, title, main-content html) of a low-quality page."""
    style = rng.choice(("keywords", "caps", "fragments", "linkfarm"))
    topic = " ".join(rng.sample(vocab, 2))
    if style == "keywords":
        parts = []
        for _ in range(rng.randint(4, 8)):
            kws = rng.sample(_SPAM_KEYWORDS, 3)
            words = rng.sample(vocab, 6)
            parts.append(
                f"{kws[0]} {topic} {kws[1]} {words[0]} {topic} {words[1]} {kws[2]} {topic} "
                f"{words[2]} {words[3]} {topic} {kws[0]} {words[4]} {words[5]} {topic}!!"
            )
        body = f"<h1>{_esc(topic.upper())} {rng.choice(_SPAM_KEYWORDS).upper()}</h1>" + "".join(
            f"<p>{_esc(p)}</p>" for p in parts
        )
    elif style == "caps":
        parts = []
        for _ in range(rng.randint(3, 6)):
            words = [w.upper() for w in rng.sample(vocab, rng.randint(8, 14))]
            parts.append(" ".join(words) + f"!!! {rng.choice(_SPAM_KEYWORDS).upper()} NOW!!!")
        body = f"<h1>{_esc(topic.upper())}!!!</h1>" + "".join(f"<p>{_esc(p)}</p>" for p in parts)
    elif style == "fragments":
        frags = []
        for _ in range(rng.randint(5, 10)):
            words = rng.sample(vocab, rng.randint(2, 4))
            frags.append(rng.choice(("", "Page ", "Login ", "Re: ", ">> ")) + " ".join(words))
        body = "".join(f"<div>{_esc(f)}</div>" for f in frags)
    else:
        links = []
        for _ in range(rng.randint(15, 30)):
            words = rng.sample(vocab, 2)
            kw = rng.choice(_SPAM_KEYWORDS)
            links.append(f'<li><a href="https://spam-{rng.randrange(10**6)}.example/">{kw} {" ".join(words)}</a></li>')
        body = f"<h2>{_esc(topic)} links</h2><ul>{''.join(links)}</ul>"
    return style, topic, body


def _edit_words(text: str, rng: random.Random, rate: float, vocab: tuple[str, ...]) -> str:
    """Substitute, insert or delete about ``rate`` of the words of ``text``."""
    words = text.split(" ")
    n_edits = max(1, round(len(words) * rate))
    for _ in range(n_edits):
        op = rng.choice(("sub", "ins", "del"))
        i = rng.randrange(len(words))
        if op == "sub":
            words[i] = rng.choice(vocab)
        elif op == "ins":
            words.insert(i, rng.choice(vocab))
        elif len(words) > 10:
            del words[i]
    return " ".join(words)


def drop_number(drop_id: str) -> int:
    """The number of a drop id (trailing digits: ``drop-004`` -> 4); drops are ordered by it."""
    match = re.search(r"(\d+)$", drop_id)
    if not match:
        raise ValueError(f"sample drop ids must end in a number (e.g. drop-004), got {drop_id!r}")
    return int(match.group(1))


def drop_id_for(number: int) -> str:
    """``4`` -> ``drop-004``."""
    return f"drop-{number:03d}"


class _Generator:
    def __init__(self, config: SampleConfig, pool: tuple[str, ...]) -> None:
        self.config = config
        self.pool = pool
        self.vocab = _vocabulary(pool)

    def _position_rng(self, number: int, k: int, purpose: str) -> random.Random:
        return random.Random(f"{self.config.seed}:{number}:{k}:{purpose}")

    def kind_of(self, number: int, k: int) -> str:
        """What position ``k`` of drop ``number`` holds (independent of every other position)."""
        c = self.config
        # The first positions are originals, so every copy has something earlier to copy.
        warmup = k < max(10, c.docs_per_drop // 10)
        r = self._position_rng(number, k, "kind").random()
        if not warmup:
            bounds = [
                ("exact_dup", c.exact_dup_fraction),
                ("near_dup", c.near_dup_fraction),
                ("para_dup", c.para_dup_fraction),
            ]
            if number > 1:
                bounds += [("cross_exact", c.cross_exact_fraction), ("cross_near", c.cross_near_fraction)]
            acc = 0.0
            for name, frac in bounds:
                acc += frac
                if r < acc:
                    return name
            r = (r - acc) / max(1e-9, 1 - acc)
        return "lq" if r < c.lq_fraction else "hq"

    def original(self, number: int, k: int) -> Page:
        """The page at position ``k`` of drop ``number`` as an original (hq or lq)."""
        kind = self.kind_of(number, k)
        rng = self._position_rng(number, k, "page")
        site = _SITES[rng.randrange(len(_SITES))]
        drop = drop_id_for(number)
        doc_id = f"{drop}-{k:06d}"
        if kind == "lq":
            style, title, body = _lq_page(rng, self.vocab, self.pool)
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower())
            url = f"https://{site[0]}/{slug}-{k}"
            return Page(doc_id, _wrap(title, body, site, rng), url, "lq", "original", site[0], lq_style=style)
        paragraphs = _hq_paragraphs(self.config.seed, number * SLOT_STRIDE + k, self.pool, rng)
        title = _title(rng, paragraphs)
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        url = f"https://{site[0]}/docs/{slug}-{number}-{k}"
        html = _wrap(title, _hq_body(title, paragraphs), site, rng)
        return Page(doc_id, html, url, "hq", "original", site[0], paragraphs=paragraphs, title=title)

    def _pick_hq_original(self, rng: random.Random, number: int, below: int) -> Page:
        for _ in range(1000):
            k = rng.randrange(below)
            if self.kind_of(number, k) == "hq":
                return self.original(number, k)
        raise RuntimeError("no high-quality original found to copy")

    def page(self, number: int, k: int) -> Page:
        """The page at position ``k`` of drop ``number`` (copies resolved to their originals)."""
        kind = self.kind_of(number, k)
        if kind in ("hq", "lq"):
            return self.original(number, k)
        rng = self._position_rng(number, k, "copy")
        doc_id = f"{drop_id_for(number)}-{k:06d}"
        if kind.startswith("cross_"):
            src = self._pick_hq_original(rng, rng.randrange(1, number), self.config.docs_per_drop)
        else:
            src = self._pick_hq_original(rng, number, k)
        url = src.url.replace("https://", "https://mirror.") + f"?copy={k}"
        if kind in ("exact_dup", "cross_exact"):
            return Page(doc_id, src.html, url, "hq", "exact_dup", src.site, list(src.paragraphs), of=src.id)
        if kind in ("near_dup", "cross_near"):
            words_total = sum(len(p.split()) for p in src.paragraphs)
            edits = max(1, round(words_total * self.config.near_dup_edit_rate))
            paragraphs = list(src.paragraphs)
            for _ in range(edits):
                i = rng.randrange(len(paragraphs))
                paragraphs[i] = _edit_words(paragraphs[i], rng, 0.0, self.vocab)  # one edit
            # The copy keeps its original's title: the word edits are the only change to the main
            # content. (A title drawn anew differed from the original's on most copies -- a second,
            # unplanned edit that put short pages below the Jaccard the edit rate promises.)
            site = next(s for s in _SITES if s[0] == src.site)
            html = _wrap(src.title, _hq_body(src.title, paragraphs), site, rng)
            return Page(doc_id, html, url, "hq", "near_dup", src.site, paragraphs, of=src.id, title=src.title)
        # para_dup: a fresh page (its own slot) that quotes one paragraph of an earlier page.
        page_rng = self._position_rng(number, k, "page")
        site = _SITES[page_rng.randrange(len(_SITES))]
        paragraphs = _hq_paragraphs(self.config.seed, number * SLOT_STRIDE + k, self.pool, page_rng)
        quoted = rng.choice(src.paragraphs)
        paragraphs.insert(rng.randrange(1, len(paragraphs) + 1), quoted)
        title = _title(page_rng, paragraphs)
        url = f"https://{site[0]}/docs/{re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')}-{number}-{k}"
        html = _wrap(title, _hq_body(title, paragraphs), site, page_rng)
        return Page(doc_id, html, url, "hq", "para_dup", site[0], paragraphs, of=src.id, quoted_paragraph=quoted)


def iter_pages(drop_id: str, config: SampleConfig = SampleConfig(), extra_dirs: tuple[str, ...] = ()) -> Iterator[Page]:
    """The pages of one drop, one at a time (benchmarks stream drops far larger than memory)."""
    validate_partition_key(drop_id)
    number = drop_number(drop_id)
    gen = _Generator(config, sentence_pool(extra_dirs))
    for k in range(config.docs_per_drop):
        yield gen.page(number, k)


def generate_drop(
    drop_id: str, config: SampleConfig = SampleConfig(), source: str = DEFAULT_SOURCE, extra_dirs: tuple[str, ...] = ()
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records (Marin input shape) and the ground truth of one drop."""
    validate_partition_key(drop_id)
    number = drop_number(drop_id)
    gen = _Generator(config, sentence_pool(extra_dirs))
    records: list[dict[str, Any]] = []
    truth: dict[str, Any] = {
        "drop_id": drop_id,
        "source": source,
        "labels": {},
        "lq_styles": {},
        "exact_dups": [],
        "near_dups": [],
        "para_dups": [],
        "boilerplate_markers": list(BOILERPLATE_MARKERS),
    }
    created = f"2024-01-{min(28, number):02d}T00:00:00Z"
    for k in range(config.docs_per_drop):
        page = gen.page(number, k)
        # Drops carry no labels (real web drops have none): the label lives in the ground truth only.
        metadata: dict[str, Any] = {"url": page.url, "site": page.site, "crawl_date": created}
        records.append({"id": page.id, "text": page.html, "source": source, "metadata": metadata})
        truth["labels"][page.id] = page.label
        if page.lq_style:
            truth["lq_styles"][page.id] = page.lq_style
        # "of_drop": the drop holding the original -- a copy of a document in a drop dedup never saw
        # (one its checksums rejected) is no duplicate to it.
        of_drop = page.of.rsplit("-", 1)[0] if page.of else None
        if page.kind == "exact_dup":
            truth["exact_dups"].append({"id": page.id, "of": page.of, "of_drop": of_drop})
        elif page.kind == "near_dup":
            truth["near_dups"].append({"id": page.id, "of": page.of, "of_drop": of_drop})
        elif page.kind == "para_dup":
            truth["para_dups"].append(
                {"id": page.id, "of": page.of, "of_drop": of_drop, "paragraph": page.quoted_paragraph}
            )
    return records, truth


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def landing_drop_dir(prefix: str, source: str, drop_id: str) -> str:
    """``<prefix>/landing/<source>/<drop_id>``."""
    return join_path(prefix, f"landing/{source}/{drop_id}")


def ground_truth_path(prefix: str, source: str, drop_id: str) -> str:
    """``<prefix>/ground_truth/<source>/<drop_id>.json``."""
    return join_path(prefix, f"ground_truth/{source}/{drop_id}.json")


def _as_warc(records: list[dict[str, Any]], truth: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records and ground truth with every id replaced by the page's WARC-Record-ID."""
    from marin_assets.transform.raw.warc_writer import warc_record_id

    def rid(doc_id: str | None) -> str | None:
        return warc_record_id(doc_id) if doc_id else doc_id

    truth = dict(truth)
    truth["labels"] = {rid(k): v for k, v in truth["labels"].items()}
    truth["lq_styles"] = {rid(k): v for k, v in truth["lq_styles"].items()}
    for kind in ("exact_dups", "near_dups", "para_dups"):
        truth[kind] = [{**d, "id": rid(d["id"]), "of": rid(d["of"])} for d in truth[kind]]
    return [{**r, "key": r["id"], "id": rid(r["id"])} for r in records], truth


def _encode_file(chunk: list[dict[str, Any]], file_format: str, name: str) -> bytes:
    if file_format == "warc":
        from marin_assets.transform.raw.warc_writer import WarcPage, encode_warc_gz

        pages = [WarcPage(r["key"], r["metadata"]["url"], r["metadata"]["crawl_date"], r["text"]) for r in chunk]
        return encode_warc_gz(pages, name)
    return gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk).encode("utf-8"), mtime=0)


def write_drop(
    prefix: str,
    drop_id: str,
    config: SampleConfig = SampleConfig(),
    source: str = DEFAULT_SOURCE,
    extra_dirs: tuple[str, ...] = (),
    file_format: str = "jsonl",
) -> dict[str, Any]:
    """Write one complete drop (data files, then ``manifest.json`` last) and its ground truth.

    ``file_format`` ``"jsonl"`` writes ``part-N.jsonl.gz`` (Marin's input shape, with labels in
    metadata); ``"warc"`` writes ``part-N.warc.gz`` with FastWARC's writer (HTTP response records
    as a crawler fetched them; ids are the WARC-Record-IDs, also in the ground truth).

    Returns the manifest. The manifest is written last and atomically: the drop becomes complete
    in one step, and a sensor never sees a half-written drop as complete.
    """
    if file_format not in ("jsonl", "warc"):
        raise ValueError(f"file_format must be 'jsonl' or 'warc', got {file_format!r}")
    records, truth = generate_drop(drop_id, config, source, extra_dirs)
    if file_format == "warc":
        records, truth = _as_warc(records, truth)
    drop_dir = landing_drop_dir(prefix, source, drop_id)
    n_files = max(1, config.files_per_drop)
    per_file = -(-len(records) // n_files)
    files = []
    for i in range(n_files):
        chunk = records[i * per_file : (i + 1) * per_file]
        name = f"part-{i:05d}.{file_format}.gz"
        data = _encode_file(chunk, file_format, name)
        atomic_write_bytes(join_path(drop_dir, name), data)
        files.append({"path": name, "bytes": len(data), "sha256": _sha256(data), "records": len(chunk)})
    atomic_write_bytes(
        ground_truth_path(prefix, source, drop_id), json.dumps(truth, indent=1, sort_keys=True).encode("utf-8")
    )
    manifest = {"drop_id": drop_id, "source": source, "created_at": truth_created(drop_id), "files": files}
    atomic_write_bytes(join_path(drop_dir, "manifest.json"), json.dumps(manifest, indent=2).encode("utf-8"))
    return manifest


def truth_created(drop_id: str) -> str:
    """The deterministic creation time of a sample drop."""
    return f"2024-01-{min(28, drop_number(drop_id)):02d}T00:00:00Z"


def main(argv: list[str] | None = None, prog: str = "python -m marin_assets.experiments.sample_data") -> None:
    """CLI: write sample drops into a landing zone. ``prog``: the program its usage names
    (``marin sample-drop`` passes its own)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", required=True, help="storage prefix (local dir or fsspec URL)")
    parser.add_argument("--drop", action="append", default=[], help="drop id (repeatable), e.g. drop-004")
    parser.add_argument("--drops", type=int, default=0, help="write drop-001..drop-N instead")
    parser.add_argument("--docs", type=int, default=DEFAULT_DOCS, help="documents per drop")
    parser.add_argument("--files", type=int, default=2, help="files per drop")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--source", default=DEFAULT_SOURCE)
    parser.add_argument(
        "--format", choices=("jsonl", "warc"), default="jsonl", help="data files: jsonl.gz or warc.gz (FastWARC)"
    )
    args = parser.parse_args(argv)
    drops = list(args.drop) + [drop_id_for(i) for i in range(1, args.drops + 1)]
    if not drops:
        parser.error("give --drop ID or --drops N")
    config = SampleConfig(seed=args.seed, docs_per_drop=args.docs, files_per_drop=args.files)
    for drop in drops:
        manifest = write_drop(args.prefix, drop, config, args.source, file_format=args.format)
        total = sum(f["records"] for f in manifest["files"])
        print(f"wrote {landing_drop_dir(args.prefix, args.source, drop)} ({total} documents)")


if __name__ == "__main__":
    main()
