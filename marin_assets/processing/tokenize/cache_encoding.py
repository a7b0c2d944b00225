"""How a cache's documents become tokens: exactly Levanter's ``BatchTokenizer``, without its overhead.

:func:`cache_format` describes a tokenizer once (in the process that writes the cache): the
backend tokenizer as transformers configures it, whether Levanter would add bos/eos around each
document (``bos + " " + text + " " + eos`` when the tokenizer does not add them itself), whether
it would split long strings (tokenizers with ``Replace`` normalizers), the stored fields and
dtypes of the output exemplar and the ledger's preprocessor metadata. :func:`encode_block` runs in
the workers: JSON lines in, per-document lengths and flat token arrays out, from one
``encode_batch`` call of the Rust tokenizer.

A worker process imports this module alone (numpy, msgspec; tokenizers at the first block): the
storage helpers and the shard reader are imported where the parent uses them, and a line msgspec
rejects is handed to :func:`marin_assets.core.io.parse_line`, so every line decodes as the shard
reader decodes it. That keeps the step engine's imports out of each worker's start-up.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

try:  # the shard reader's fast decoder (core.io); what it rejects goes to core.io.parse_line
    import msgspec as _msgspec

    _fast_loads: Any = _msgspec.json.Decoder().decode
    _FastDecodeError: type[Exception] = _msgspec.DecodeError
except ImportError:  # pragma: no cover - exercised where msgspec is not installed
    _fast_loads = None
    _FastDecodeError = ValueError

LONG_STRING_CHARS = 10_000  # levanter.data.text.LONG_STRING_WORKAROUND
SUPPORTED_FIELDS = ("input_ids", "token_type_ids")


# ------------------------------------------------------------------------------------------
# Tokenizer description (built once here, shipped to workers)


@dataclass(frozen=True)
class EncodingSpec:
    """What a worker needs to tokenize exactly like Levanter's ``BatchTokenizer``."""

    backend_json: str  # the transformers-configured backend tokenizer, serialized
    text_key: str
    bos_prefix: str  # "<bos> " or ""
    eos_suffix: str  # " <eos>" or ""
    split_long_strings: bool
    type_ids: bool  # token_type_ids stored and possibly non-zero (else all zeros, not computed)

    @property
    def key(self) -> str:
        return hashlib.sha1(self.backend_json.encode()).hexdigest()


@dataclass(frozen=True)
class CacheFormat:
    """The preprocessor side of a cache: fields, their dtypes and Levanter's ledger metadata."""

    spec: EncodingSpec
    dtypes: dict[str, str]
    metadata: dict[str, Any]


def load_hf_tokenizer(path: str):
    """``AutoTokenizer`` of a local directory, or of a remote one (gs://...) fetched to a temp dir."""
    from transformers import AutoTokenizer

    from marin_assets.execution.storage import filesystem

    if "://" not in path:
        return AutoTokenizer.from_pretrained(path)
    fs, p = filesystem(path)
    with tempfile.TemporaryDirectory(prefix="marin-tok-") as tmp:
        for entry in fs.ls(p, detail=True):
            if entry.get("type") == "file":
                fs.get_file(entry["name"], os.path.join(tmp, os.path.basename(entry["name"].rstrip("/"))))
        tokenizer = AutoTokenizer.from_pretrained(tmp)
    tokenizer.name_or_path = path
    return tokenizer


def _needs_long_string_split(tokenizer) -> bool:
    """Levanter's ``BatchTokenizer._needs_long_sequence_workaround``."""
    from tokenizers import normalizers

    normalizer = tokenizer.backend_tokenizer.normalizer
    return normalizer is not None and isinstance(normalizer, (normalizers.Replace, normalizers.Sequence))


def _token_content(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value


def _plain_fast_format(tokenizer_path: str, text_key: str) -> CacheFormat | None:
    """:func:`cache_format` of a plain ``PreTrainedTokenizerFast`` directory, read without transformers.

    Importing transformers' auto classes costs seconds (more than tokenizing a small cache);
    for the generic fast class, whose behaviour is its three JSON files, this gives the same
    description. Other classes (Llama, GPT-2, ...) adjust the backend in code: None here.
    """
    import json

    from marin_assets.execution.storage import join_path, read_bytes

    def load(name: str) -> dict[str, Any] | None:
        data = read_bytes(join_path(tokenizer_path, name))
        return None if data is None else json.loads(data)

    config = load("tokenizer_config.json")
    backend_bytes = read_bytes(join_path(tokenizer_path, "tokenizer.json"))
    if not config or config.get("tokenizer_class") != "PreTrainedTokenizerFast" or backend_bytes is None:
        return None
    specials = {**config, **(load("special_tokens_map.json") or {})}
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(backend_bytes.decode("utf-8"))
    backend.no_truncation()
    backend.no_padding()
    bos, eos = _token_content(specials.get("bos_token")), _token_content(specials.get("eos_token"))
    bos_id = backend.token_to_id(bos) if bos else None
    eos_id = backend.token_to_id(eos) if eos else None
    probe = backend.encode("hi there", add_special_tokens=True)
    append_bos = bos_id is not None and probe.ids[0] != bos_id
    append_eos = eos_id is not None and probe.ids[-1] != eos_id
    input_names = config.get("model_input_names") or ["input_ids", "token_type_ids", "attention_mask"]
    fields = [name for name in input_names if name != "attention_mask"]
    unknown = sorted(set(fields) - set(SUPPORTED_FIELDS))
    if unknown or "input_ids" not in fields:
        return None
    normalizer = (json.loads(backend.to_str()).get("normalizer") or {}).get("type")
    post = (json.loads(backend.to_str()).get("post_processor") or {}).get("type")
    spec = EncodingSpec(
        backend_json=backend.to_str(),
        text_key=text_key,
        bos_prefix=bos + " " if append_bos else "",
        eos_suffix=" " + eos if append_eos else "",
        split_long_strings=normalizer in ("Replace", "Sequence"),
        type_ids="token_type_ids" in fields and post not in (None, "ByteLevel"),
    )
    metadata = {
        "tokenizer": tokenizer_path,
        "vocab_size": backend.get_vocab_size(with_added_tokens=True),
        "return_attention_mask": False,
        "padding": False,
        "max_length": config.get("model_max_length", int(1e30)),
        "append_bos": append_bos,
        "append_eos": append_eos,
    }
    return CacheFormat(spec=spec, dtypes={name: "int64" for name in fields}, metadata=metadata)


def cache_format(tokenizer_path: str, text_key: str = "text", *, use_transformers: bool = False) -> CacheFormat:
    """Describe how ``tokenizer_path`` fills a cache, mirroring Levanter's ``BatchTokenizer``.

    A plain ``PreTrainedTokenizerFast`` directory is read directly (see :func:`_plain_fast_format`)
    unless ``use_transformers``; everything else is loaded with ``AutoTokenizer``.
    """
    import json

    if not use_transformers:
        plain = _plain_fast_format(tokenizer_path, text_key)
        if plain is not None:
            return plain
    tokenizer = load_hf_tokenizer(tokenizer_path)
    if not tokenizer.is_fast:
        raise ValueError(f"tokenizer {tokenizer_path} has no fast (Rust) backend; use writer='levanter'")
    append_bos = append_eos = False
    if tokenizer.bos_token_id is not None or tokenizer.eos_token_id is not None:
        probe = tokenizer("hi there")["input_ids"]
        append_eos = tokenizer.eos_token_id is not None and probe[-1] != tokenizer.eos_token_id
        append_bos = tokenizer.bos_token_id is not None and probe[0] != tokenizer.bos_token_id
    exemplar = dict(**tokenizer("hi there", return_attention_mask=False, verbose=False))
    unknown = sorted(set(exemplar) - set(SUPPORTED_FIELDS))
    if unknown or "input_ids" not in exemplar:
        raise ValueError(f"tokenizer {tokenizer_path} returns fields {sorted(exemplar)}; supported: {SUPPORTED_FIELDS}")
    backend = tokenizer.backend_tokenizer
    post = json.loads(backend.to_str()).get("post_processor") or {}
    spec = EncodingSpec(
        backend_json=backend.to_str(),
        text_key=text_key,
        bos_prefix=tokenizer.bos_token + " " if append_bos else "",
        eos_suffix=" " + tokenizer.eos_token if append_eos else "",
        split_long_strings=_needs_long_string_split(tokenizer),
        type_ids="token_type_ids" in exemplar and post.get("type") not in (None, "ByteLevel"),
    )
    metadata = {
        "tokenizer": tokenizer.name_or_path,
        "vocab_size": len(tokenizer),
        "return_attention_mask": False,
        "padding": False,
        "max_length": tokenizer.model_max_length,
        "append_bos": append_bos,
        "append_eos": append_eos,
    }
    dtypes = {name: np.asarray(value).dtype.name for name, value in exemplar.items()}
    return CacheFormat(spec=spec, dtypes=dtypes, metadata=metadata)


# ------------------------------------------------------------------------------------------
# Worker side: one block of lines -> token arrays


@dataclass
class EncodedBlock:
    """Tokens of one block of documents: per-document lengths and the flat token ids."""

    lengths: np.ndarray  # int64, one per document
    input_ids: np.ndarray  # int32
    token_type_ids: np.ndarray | None  # int32, None when all zeros
    chars: int


_WORKER_TOKENIZERS: dict[str, Any] = {}


def init_local_worker() -> None:
    """Initializer of a local pool's worker: one Rayon thread (the pool has one process per core)."""
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def warm_up() -> None:
    """Import what encoding needs, so that a worker's start-up overlaps the parent's setup."""
    import tokenizers  # noqa: F401


def _block_records(block: bytes, source: str, first_line: int) -> Iterator[tuple[int, Any]]:
    """``core.io.iter_block_records``: ``(line_number, record)`` of every non-blank line of ``block``."""
    for offset, line in enumerate(block.split(b"\n")):
        if line and not line.isspace():
            try:
                if _fast_loads is None:
                    raise _FastDecodeError("no fast decoder installed")
                record = _fast_loads(line)
            except _FastDecodeError:
                from marin_assets.core.io import parse_line  # json decides (or names the file and line)

                record = parse_line(line, source, first_line + offset)
            yield first_line + offset, record


def _backend(spec: EncodingSpec):
    tok = _WORKER_TOKENIZERS.get(spec.key)
    if tok is None:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_str(spec.backend_json)
        tok.no_truncation()  # transformers does the same for a call without truncation/padding
        tok.no_padding()
        _WORKER_TOKENIZERS.clear()
        _WORKER_TOKENIZERS[spec.key] = tok
    return tok


def _split_long(texts: list[str]) -> tuple[list[str], list[int]]:
    """Levanter's ``_break_for_long_sequences``: pieces of at most ~10k chars, cut at whitespace."""
    import regex

    ws = regex.compile(r"\s")
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        while len(text) > LONG_STRING_CHARS:
            match = ws.search(text, LONG_STRING_CHARS)
            split = len(text) if match is None else match.start()
            pieces.append(text[:split])
            owner.append(i)
            text = text[split:]
        pieces.append(text)
        owner.append(i)
    return pieces, owner


def encode_block(spec: EncodingSpec, block: bytes, source: str, first_line: int) -> EncodedBlock:
    """Tokenize the documents of one block of JSON lines (runs in a worker process or Ray task).

    A line that is not JSON, lacks ``spec.text_key`` or holds a non-string there raises
    ``ValueError`` naming ``source`` and the line.
    """
    texts: list[str] = []
    chars = 0
    for line_number, record in _block_records(block, source, first_line):
        text = record.get(spec.text_key) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ValueError(f"{source}:{line_number}: no string field {spec.text_key!r} in the record")
        chars += len(text)
        texts.append(spec.bos_prefix + text + spec.eos_suffix if spec.bos_prefix or spec.eos_suffix else text)
    tok = _backend(spec)
    if spec.split_long_strings:
        pieces, owner = _split_long(texts)
        encodings = tok.encode_batch(pieces, add_special_tokens=True)
        per_doc: list[list[Any]] = [[] for _ in texts]
        for enc, i in zip(encodings, owner, strict=True):
            per_doc[i].append(enc)
        ids_lists = [list(chain.from_iterable(e.ids for e in encs)) for encs in per_doc]
        type_lists = [list(chain.from_iterable(e.type_ids for e in encs)) for encs in per_doc] if spec.type_ids else []
    else:
        encodings = tok.encode_batch(texts, add_special_tokens=True)
        ids_lists = [e.ids for e in encodings]
        type_lists = [e.type_ids for e in encodings] if spec.type_ids else []
    lengths = np.fromiter(map(len, ids_lists), dtype=np.int64, count=len(ids_lists))
    total = int(lengths.sum())
    ids = np.fromiter(chain.from_iterable(ids_lists), dtype=np.int32, count=total)
    type_ids = np.fromiter(chain.from_iterable(type_lists), dtype=np.int32, count=total) if spec.type_ids else None
    if type_ids is not None and not type_ids.any():
        type_ids = None
    return EncodedBlock(lengths=lengths, input_ids=ids, token_type_ids=type_ids, chars=chars)
