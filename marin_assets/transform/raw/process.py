"""Stage 1: raw documents of a drop -> sharded Dolma records + provenance.json + quarantine.

Reads every input of the drop's manifest -- JSON lines (plain, gzip, zstd), parquet, WARC / WET
(``.warc.gz``) and saved Hugging Face dataset folders -- with the readers of ``readers.py``
(format sniffed from the content). Input is untrusted: each bad line/row/record/file goes to
``quarantine/<input-index>.jsonl`` (the shard-stage schema: stage, file, line, id, reason,
detail, sample) and is counted; good records of the same file are always kept.

Every record keeps its provenance in ``metadata``: ``landing_file`` and ``landing_line`` (line,
row or WARC record number) always; WARC adds ``warc_record_id``, ``warc_offset``, ``warc_date``
and ``url``; HF datasets add ``hf_split`` and ``hf_row``; any other field or column of a record
(``url``, ``date``, ...) is kept there too. ``metadata.content_type`` (``text/html`` or
``text/plain``) tells the text stage whether to extract or pass the text through.

Output layout (below the step's output path for the drop)::

    docs/shard-FFFFF-CCCC.jsonl.gz   Dolma records {id, text, source, added, created?, metadata}
    quarantine/FFFFF.jsonl           quarantined items of input FFFFF
    provenance.json                  drop, manifest checksums, per-input counts and formats
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from marin_assets.core.io import list_files, write_json
from marin_assets.core.shard_stage import (
    SHARD_SUFFIX,
    Counters,
    Quarantine,
    ShardResult,
    ShardStage,
    write_shard,
)
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import filesystem, join_path
from marin_assets.landing.zone import REJECTED_FILES, STATUS_VALID, validate_drop
from marin_assets.transform.raw.readers import (
    finite_or_text,
    format_from_name,
    hf_dataset_folders,
    read_file,
    read_hf_dataset,
)

HF_INPUT = "hf-dataset:"  # marks a saved HF dataset folder among the stage's inputs


@dataclass(frozen=True)
class RawConfig:
    """Config of the raw stage.

    Attributes:
        landing_dir: ``<prefix>/landing/<source>`` (the folder holding the drops).
        drop_id: the drop (partition key).
        output_path: where docs/, quarantine/ and provenance.json go.
        source: Dolma ``source`` for records without one (default: the landing folder's name).
        docs_per_shard: records per output shard.
        max_doc_bytes: larger documents are quarantined (reason ``too_large``).
        verify_checksums: re-check the manifest's sha256 before reading.
        drop_path: read this folder as the drop instead of ``landing_dir/drop_id`` -- e.g. the
            output of a ``default_download`` step (``output_path_of(download)``).
        text_key / id_key: the field (JSON lines) or column (parquet, HF datasets) holding the
            text / the id, for inputs that name them differently (e.g. ``content``, ``doc_id``).
        content_type: ``metadata.content_type`` of records that carry none: ``text/html`` (the
            text stage extracts the main content) or ``text/plain`` (already text, passed
            through). None: decided per record by :func:`looks_like_html`.
        revision: an explicit reprocess of the source's drops. Versioned when set (the pipeline
            passes ``versioned(revision)`` only when it is not 0, so existing hashes stay): every
            drop is read again into new output folders, the old outputs stay under the old hash.
    """

    landing_dir: StepPath
    drop_id: str
    output_path: StepPath
    source: str | None = None
    docs_per_shard: int = 1000
    max_doc_bytes: int = 10_000_000
    verify_checksums: bool = True
    drop_path: StepPath | None = None
    text_key: str = "text"
    id_key: str = "id"
    content_type: str | None = None
    revision: int = 0


# Top-level fields of an input record that are Dolma fields, not metadata.
_DOLMA_FIELDS = ("id", "text", "source", "added", "created", "metadata")
# Fields that hold the fetch / creation date, in order of preference (Dolma ``created``).
_DATE_FIELDS = ("created", "date", "timestamp", "crawl_date")


# A character that shows: neither white space nor a zero-width / invisible format character
# (ZWSP, ZWNJ, ZWJ, LRM/RLM, word joiner and friends, BOM, soft hyphen, Mongolian vowel separator).
_VISIBLE = re.compile(r"[^\s\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff\u00ad\u180e]")
# An HTML element a page has and plain text almost never does: a known tag, opening or closing.
_HTML_TAG = re.compile(
    r"<\s*/?\s*(?:!doctype\s+html|html|head|body|title|meta|p|div|span|br|a|li|ul|ol|table|tr|td|h[1-6]|"
    r"script|style|article|section|header|footer|nav|img|b|i|em|strong|pre|code)"
    r"(?:\s+[\w:-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s<>\"']+))?)*\s*/?\s*>",
    re.IGNORECASE,
)
_HTML_SNIFF_CHARS = 100_000


def looks_like_html(text: str) -> bool:
    """True when ``text`` is markup: it opens with a tag, or holds a common HTML element.

    Plain text (FineWeb / C4-style parquet, JSON lines) is not, even with ``a < b`` or
    ``vector<int>`` in it: the HTML extractor would merge its paragraphs and eat such spans.
    """
    head = text[:_HTML_SNIFF_CHARS]
    stripped = head.lstrip("\ufeff \t\r\n")
    if stripped.startswith("<") and _HTML_TAG.match(stripped) or stripped[:2] in ("<!", "<?"):
        return True
    return _HTML_TAG.search(head) is not None


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON: dates/times as ISO text, bytes and other objects as text, NaN and
    infinities as ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"`` (never bare tokens: not JSON)."""
    if isinstance(value, float):
        return finite_or_text(value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "isoformat"):  # datetime / date / time (parquet timestamp columns)
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def to_dolma(
    obj: Any,
    q: Quarantine,
    line: int,
    name: str,
    default_source: str,
    added: str,
    max_doc_bytes: int,
    content_type: str | None = None,
) -> dict[str, Any] | None:
    """A Dolma record from a parsed input object, or None (quarantined with a reason).

    ``metadata.content_type`` is set when the input has none (``content_type``, else sniffed),
    so that the text stage extracts HTML and passes plain text through.
    """
    if not isinstance(obj, dict):
        q.add("not_an_object", f"JSON value is a {type(obj).__name__}, not an object", line=line, sample=repr(obj))
        return None
    doc_id = obj.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        q.add("missing_id", "record has no non-empty string 'id'", line=line, sample=str(obj))
        return None
    text = obj.get("text")
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "text_not_string"
        q.add(reason, f"record {doc_id!r}: 'text' is {type(text).__name__}", line=line, doc_id=doc_id)
        return None
    if _VISIBLE.search(text) is None:  # empty, whitespace or zero-width characters only: no document
        q.add("empty_text", f"record {doc_id!r} has no visible text", line=line, doc_id=doc_id, sample=text)
        return None
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_doc_bytes:
        q.add(
            "too_large",
            f"record {doc_id!r} has {size} bytes > max_doc_bytes {max_doc_bytes}",
            line=line,
            doc_id=doc_id,
            sample=text,
        )
        return None
    metadata = json_safe(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else {}
    # Other fields (url, date, dump, language ...) are provenance: kept as metadata, never dropped.
    extra = {k: json_safe(v) for k, v in obj.items() if k not in _DOLMA_FIELDS and k not in metadata}
    metadata = {**extra, **metadata, "landing_file": name, "landing_line": line}
    if not isinstance(metadata.get("content_type"), str) or not metadata["content_type"]:
        metadata["content_type"] = content_type or ("text/html" if looks_like_html(text) else "text/plain")
    record: dict[str, Any] = {
        "id": doc_id,
        "text": text,
        "source": obj.get("source") if isinstance(obj.get("source"), str) else default_source,
        "added": added,
        "metadata": metadata,
    }
    for key in _DATE_FIELDS:
        created = json_safe(obj.get(key)) or metadata.get(key)
        if isinstance(created, str) and created:
            record["created"] = created
            break
    return record


class RawStage(ShardStage):
    """One shard task per input (a file, or a saved HF dataset folder) of the drop."""

    stage = "raw"
    rate_counter = "records_in"

    def __init__(self, config: RawConfig, drop_path: str, inputs: list[str], source: str, added: str) -> None:
        super().__init__(drop_path, config.output_path)
        self.config = config
        self.inputs = inputs
        self.index = {name: i for i, name in enumerate(inputs)}
        self.source = source
        self.added = added

    def shards(self) -> list[str]:
        return list(self.inputs)

    def quarantine_file(self, shard: str) -> str:
        return shard.removeprefix(HF_INPUT)

    def quarantine_path(self, shard: str) -> str:
        return join_path(self.output_path, f"quarantine/{self.index[shard]:05d}.jsonl")

    def process_shard(self, shard: str, counters: Counters, q: Quarantine) -> Any:
        config = self.config
        file_index = self.index[shard]
        name = shard.removeprefix(HF_INPUT)
        path = join_path(self.input_path, name)
        records: list[dict[str, Any]] = []
        seen_ids: set[str] = set()
        samples: list[dict[str, Any]] = []
        shard_count = 0

        def flush() -> None:
            nonlocal records, shard_count
            if records:
                out = join_path(config.output_path, f"docs/shard-{file_index:05d}-{shard_count:04d}{SHARD_SUFFIX}")
                with counters.timer("write"):
                    counters.add("bytes_out", write_shard(out, records))
                shard_count += 1
                records = []

        fmt: str | None
        if shard.startswith(HF_INPUT):
            fmt = "hf-dataset"
            items = read_hf_dataset(path, q, f"{config.drop_id}/{name}", config.text_key, config.id_key)
            counters.add("bytes_in", _tree_size(path))
        else:
            fs, p = filesystem(path)
            size = fs.size(p) or 0
            counters.add("bytes_in", size)
            if size == 0:  # an empty file holds no records; counted, not quarantined
                counters.add("empty_files")
                return {"file": name, "format": None, "ids": [], "samples": []}
            fmt, items = read_file(
                path,
                name,
                config.max_doc_bytes,
                q,
                id_prefix=f"{config.drop_id}/{name}",
                text_key=config.text_key,
                id_key=config.id_key,
            )
        with counters.timer("read+parse"):
            for position, obj in items:
                counters.add("records_in")
                if obj is None:  # a WARC record that is not a page (request, redirect, image ...)
                    counters.add("records_skipped")
                    continue
                rec = to_dolma(
                    obj, q, position, name, self.source, self.added, config.max_doc_bytes, config.content_type
                )
                if rec is None:
                    continue
                if rec["id"] in seen_ids:
                    q.add("duplicate_id", f"id {rec['id']!r} repeats within the file", line=position, doc_id=rec["id"])
                    continue
                seen_ids.add(rec["id"])
                records.append(rec)
                counters.add("documents_out")
                if len(samples) < 3:
                    samples.append({"id": rec["id"], "url": rec["metadata"].get("url", ""), "text": rec["text"][:150]})
                if len(records) >= config.docs_per_shard:
                    flush()
        flush()
        counters.add("output_shards", shard_count)
        claimed = None if shard.startswith(HF_INPUT) else format_from_name(name)
        # A file nothing of which could be read (no format, no text column, not parquet at all, ...)
        # is rejected whole: its one-line reason goes to the metadata and the drops table.
        whole = [r for r in q.records if r["line"] is None and r["offset"] is None]
        rejected = whole[0]["detail"].splitlines()[0][:300] if whole and not seen_ids else None
        return {
            "file": name,
            "format": fmt,
            "format_from_name": claimed,
            "ids": sorted(seen_ids) if len(seen_ids) < 2_000_000 else [],
            "samples": samples,
            "rejected": rejected,
        }

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        # Ids must be unique across the drop: a repeat in a later file is reported (and fails the
        # ids-unique asset check) rather than silently dropped, since we cannot tell which is right.
        id_counts: Counter[str] = Counter()
        files = []
        for r in results:
            extra = r.extra
            id_counts.update(extra.pop("ids"))
            files.append({**extra, **r.counts, "quarantine_reasons": r.quarantine})
        duplicate_ids = sorted(i for i, c in id_counts.items() if c > 1)
        mismatched = [f["file"] for f in files if f.get("format_from_name") and f["format"] != f["format_from_name"]]
        rejected = [f"{f['file']}: {f['rejected']}" for f in files if f.get("rejected")]
        provenance = {
            "drop_id": self.config.drop_id,
            "source": self.source,
            "landing_path": self.input_path,
            "manifest_files": self.inputs,
            "added": self.added,
            "config": asdict(self.config),
            "files": files,
            "duplicate_ids_across_files": duplicate_ids[:100],
        }
        write_json(join_path(self.output_path, "provenance.json"), provenance)
        return {
            "drop_id": self.config.drop_id,
            "files": len(results),
            "formats": dict(sorted(Counter(str(f["format"]) for f in files).items())),
            "format_mismatches": mismatched[:20],
            "shards": len(list_files(join_path(self.output_path, "docs"), SHARD_SUFFIX)),
            "duplicate_ids": len(duplicate_ids),
            "empty_files": sum(r.counts.get("empty_files", 0) for r in results),
            REJECTED_FILES: rejected[:20],
            "rejected_files_count": len(rejected),
        }


def _tree_size(path: str) -> int:
    fs, p = filesystem(path)
    return sum(info.get("size") or 0 for info in fs.find(p, detail=True).values())


def drop_inputs(manifest: dict[str, Any]) -> list[str]:
    """The stage's inputs: every manifest file outside a saved HF dataset folder, plus those folders."""
    names = [entry["path"] for entry in manifest["files"]]
    folders = hf_dataset_folders(names)
    inside = {n for n in names for f in folders if f == "" or n.startswith(f + "/")}
    return [n for n in names if n not in inside] + [HF_INPUT + f for f in folders]


def run_raw(config: RawConfig) -> dict[str, Any]:
    """Step function of the raw stage; returns materialization metadata."""
    drop_path = config.drop_path or join_path(config.landing_dir, config.drop_id)
    status, reason, manifest = validate_drop(drop_path, config.drop_id, config.verify_checksums)
    if status != STATUS_VALID:
        raise RuntimeError(f"drop {config.drop_id!r} at {drop_path} is {status}: {reason}")
    manifest_source = manifest.get("source") if config.drop_path and isinstance(manifest.get("source"), str) else None
    source = config.source or manifest_source or config.landing_dir.rstrip("/").rsplit("/", 1)[-1]
    added = manifest.get("created_at") if isinstance(manifest.get("created_at"), str) else None
    added = added or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    stage = RawStage(config, drop_path, drop_inputs(manifest), source, added)
    return stage.run()
