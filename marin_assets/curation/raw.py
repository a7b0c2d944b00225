"""Stage 1: raw documents of a drop -> sharded Dolma jsonl.gz + provenance.json + quarantine.

Reads every file listed in the drop's manifest (jsonl, jsonl.gz, parquet). Input is untrusted:
each bad line/row/file goes to ``quarantine/<file-index>.jsonl`` with file, line and a reason
code, and is counted; good records of the same file are always kept (a truncated gzip keeps
every line before the cut, a non-JSON line does not stop the lines after it).

Output layout (below the step's output path for the drop)::

    docs/shard-FFFFF-CCCC.jsonl.gz   Dolma records {id, text, source, added, created?, metadata}
    quarantine/FFFFF.jsonl           {file, line, reason, detail, sample}
    provenance.json                  drop, manifest checksums, per-file counts
"""

from __future__ import annotations

import json
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from marin_assets.curation.io import list_files, map_tasks, write_json, write_jsonl, write_jsonl_gz
from marin_assets.curation.landing import STATUS_VALID, validate_drop
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import filesystem, join_path

MAX_QUARANTINE_RECORDS_PER_FILE = 10_000
SAMPLE_CHARS = 200


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
        use_ray: read files as parallel Ray tasks (one per file).
    """

    landing_dir: str
    drop_id: str
    output_path: str
    source: str | None = None
    docs_per_shard: int = 1000
    max_doc_bytes: int = 10_000_000
    verify_checksums: bool = True
    use_ray: bool = False


class _Quarantine:
    def __init__(self, file: str) -> None:
        self.file = file
        self.records: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()

    def add(self, line: int | None, reason: str, detail: str, sample: bytes | str | None = None) -> None:
        self.counts[reason] += 1
        if len(self.records) < MAX_QUARANTINE_RECORDS_PER_FILE:
            if isinstance(sample, bytes):
                sample = sample[:SAMPLE_CHARS].decode("utf-8", errors="replace")
            elif isinstance(sample, str):
                sample = sample[:SAMPLE_CHARS]
            self.records.append({"file": self.file, "line": line, "reason": reason, "detail": detail, "sample": sample})


def _iter_lines(fs: Any, path: str, gz: bool, max_line: int, q: _Quarantine) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, bytes) of a possibly gzipped, possibly broken text file.

    Decompresses incrementally with zlib so that a truncated or corrupt stream still yields every
    complete line before the damage; the damage itself is quarantined once.
    """
    decomp = zlib.decompressobj(wbits=47) if gz else None  # 47: gzip or zlib header, auto-detected
    buf = bytearray()
    line_no = 0
    skipping = False  # inside an over-long line: drop bytes until the next newline

    def split(final: bool) -> Iterator[tuple[int, bytes]]:
        nonlocal buf, line_no, skipping
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            start = nl + 1
            line_no += 1
            if skipping:
                skipping = False
                continue
            yield line_no, line
        del buf[:start]
        if len(buf) > max_line and not skipping:
            line_no += 1
            q.add(line_no, "line_too_long", f"line longer than {max_line} bytes", bytes(buf[:SAMPLE_CHARS]))
            skipping = True
            buf.clear()
        elif skipping:
            buf.clear()
        if final and buf:
            line_no += 1
            if not skipping:
                yield line_no, bytes(buf)
            buf.clear()

    with fs.open(path, "rb") as handle:
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                break
            if decomp is not None:
                try:
                    data = decomp.decompress(chunk)
                    # Concatenated gzip members (e.g. appended files) are valid gzip.
                    while decomp.eof and decomp.unused_data:
                        rest = decomp.unused_data
                        decomp = zlib.decompressobj(wbits=47)
                        data += decomp.decompress(rest)
                except zlib.error as exc:
                    yield from split(final=True)
                    q.add(None, "corrupt_gzip", f"corrupt gzip stream after line {line_no}: {exc}")
                    return
                buf += data
            else:
                buf += chunk
            yield from split(final=False)
    truncated = decomp is not None and not decomp.eof
    yield from split(final=True)
    if truncated:
        q.add(None, "truncated_gzip", f"gzip stream ends early (after line {line_no}); lines before kept")


def _to_dolma(
    obj: Any, q: _Quarantine, line: int, name: str, default_source: str, added: str, max_doc_bytes: int
) -> dict[str, Any] | None:
    """A Dolma record from a parsed input object, or None (quarantined with a reason)."""
    if not isinstance(obj, dict):
        q.add(line, "not_an_object", f"JSON value is a {type(obj).__name__}, not an object", json.dumps(obj)[:200])
        return None
    doc_id = obj.get("id")
    if isinstance(doc_id, int) and not isinstance(doc_id, bool):
        doc_id = str(doc_id)
    if not isinstance(doc_id, str) or not doc_id.strip():
        q.add(line, "missing_id", "record has no non-empty string 'id'", str(obj)[:200])
        return None
    text = obj.get("text")
    if not isinstance(text, str):
        reason = "missing_text" if text is None else "text_not_string"
        q.add(line, reason, f"record {doc_id!r}: 'text' is {type(text).__name__}", doc_id)
        return None
    if not text.strip():
        q.add(line, "empty_text", f"record {doc_id!r} has empty text", doc_id)
        return None
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_doc_bytes:
        q.add(line, "too_large", f"record {doc_id!r} has {size} bytes > max_doc_bytes {max_doc_bytes}", text[:200])
        return None
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    metadata = {**metadata, "landing_file": name, "landing_line": line}
    record: dict[str, Any] = {
        "id": doc_id,
        "text": text,
        "source": obj.get("source") if isinstance(obj.get("source"), str) else default_source,
        "added": added,
        "metadata": metadata,
    }
    created = obj.get("created") or metadata.get("crawl_date")
    if isinstance(created, str):
        record["created"] = created
    return record


def _parse_line(raw: bytes, line: int, q: _Quarantine) -> Any:
    raw = raw.rstrip(b"\r")
    if not raw.strip():
        return _SKIP
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        q.add(line, "invalid_utf8", f"invalid UTF-8 at byte {exc.start}", raw)
        return _SKIP
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        q.add(line, "not_json", f"not JSON: {str(exc)[:120]}", text)
        return _SKIP


_SKIP = object()


def _read_parquet(fs: Any, path: str, q: _Quarantine) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        handle = fs.open(path, "rb")
        pf = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError, ValueError) as exc:
        q.add(None, "bad_parquet", f"not a readable parquet file: {exc}")
        return
    names = pf.schema_arrow.names
    missing = [c for c in ("id", "text") if c not in names]
    if missing:
        q.add(None, "parquet_schema", f"parquet schema lacks column(s) {missing} (has {names})")
        handle.close()
        return
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=1000):
            for rec in batch.to_pylist():
                row += 1
                yield row, rec
    except (pa.ArrowException, OSError) as exc:
        q.add(None, "bad_parquet", f"parquet read failed after row {row}: {exc}")
    finally:
        handle.close()


def read_drop_file(
    drop_path: str,
    name: str,
    file_index: int,
    output_path: str,
    default_source: str,
    added: str,
    docs_per_shard: int,
    max_doc_bytes: int,
) -> dict[str, Any]:
    """Read one landing file into shards + a quarantine file; return its counts (a Ray task)."""
    fs, p = filesystem(join_path(drop_path, name))
    q = _Quarantine(name)
    records: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    shard_count = 0
    bytes_out = 0
    docs_out = 0
    lines_in = 0
    samples: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal records, shard_count, bytes_out
        if records:
            path = join_path(output_path, f"docs/shard-{file_index:05d}-{shard_count:04d}.jsonl.gz")
            bytes_out += write_jsonl_gz(path, records)
            shard_count += 1
            records = []

    def accept(obj: Any, line: int) -> None:
        nonlocal docs_out
        rec = _to_dolma(obj, q, line, name, default_source, added, max_doc_bytes)
        if rec is None:
            return
        if rec["id"] in seen_ids:
            q.add(line, "duplicate_id", f"id {rec['id']!r} repeats within the file", rec["id"])
            return
        seen_ids.add(rec["id"])
        records.append(rec)
        docs_out += 1
        if len(samples) < 3:
            samples.append({"id": rec["id"], "url": rec["metadata"].get("url", ""), "text": rec["text"][:150]})
        if len(records) >= docs_per_shard:
            flush()

    size = fs.size(p) or 0
    lower = name.lower()
    if size == 0:
        pass  # an empty file holds no records; counted as empty_files by the caller
    elif lower.endswith(".parquet"):
        for row, obj in _read_parquet(fs, p, q):
            lines_in += 1
            accept(obj, row)
    elif lower.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz", ".ndjson", ".ndjson.gz")):
        gz = lower.endswith(".gz")
        max_line = max_doc_bytes * 2 + (1 << 20)  # JSON escaping can double a document
        for line, raw in _iter_lines(fs, p, gz, max_line, q):
            lines_in += 1
            obj = _parse_line(raw, line, q)
            if obj is not _SKIP:
                accept(obj, line)
    else:
        q.add(None, "unsupported_format", "unsupported file type (want .jsonl, .jsonl.gz or .parquet)")
    flush()
    if q.records:
        write_jsonl(join_path(output_path, f"quarantine/{file_index:05d}.jsonl"), q.records)
    return {
        "file": name,
        "bytes_in": size,
        "records_in": lines_in,
        "documents_out": docs_out,
        "bytes_out": bytes_out,
        "quarantined": sum(q.counts.values()),
        "quarantine_reasons": dict(q.counts),
        "shards": shard_count,
        "empty": size == 0,
        "ids": sorted(seen_ids) if len(seen_ids) < 2_000_000 else [],
        "samples": samples,
    }


def _clear(path: str) -> None:
    fs, p = filesystem(path)
    if fs.exists(p):
        fs.rm(p, recursive=True)


def run_raw(config: RawConfig) -> dict[str, Any]:
    """Step function of the raw stage; returns materialization metadata."""
    start = time.monotonic()
    drop_path = join_path(config.landing_dir, config.drop_id)
    status, reason, manifest = validate_drop(drop_path, config.drop_id, config.verify_checksums)
    if status != STATUS_VALID:
        raise RuntimeError(f"drop {config.drop_id!r} at {drop_path} is {status}: {reason}")
    source = config.source or config.landing_dir.rstrip("/").rsplit("/", 1)[-1]
    added = manifest.get("created_at") if isinstance(manifest.get("created_at"), str) else None
    added = added or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # A rerun after a crash starts from a clean slate: leftovers of the old attempt never mix in.
    for sub in ("docs", "quarantine"):
        _clear(join_path(config.output_path, sub))
    names = [entry["path"] for entry in manifest["files"]]
    args = [
        (drop_path, name, i, config.output_path, source, added, config.docs_per_shard, config.max_doc_bytes)
        for i, name in enumerate(names)
    ]
    results = map_tasks(read_drop_file, args, config.use_ray)
    # Ids must be unique across the drop: a repeat in a later file is reported (and fails the
    # ids-unique asset check) rather than silently dropped, since we cannot tell which is right.
    id_counts: Counter[str] = Counter()
    for r in results:
        id_counts.update(r.pop("ids"))
    duplicate_ids = sorted(i for i, c in id_counts.items() if c > 1)
    reasons: Counter[str] = Counter()
    for r in results:
        reasons.update(r["quarantine_reasons"])
    samples = [s for r in results for s in r.pop("samples")][:3]
    provenance = {
        "drop_id": config.drop_id,
        "source": source,
        "landing_path": drop_path,
        "manifest": manifest,
        "added": added,
        "config": asdict(config),
        "files": results,
        "duplicate_ids_across_files": duplicate_ids[:100],
    }
    write_json(join_path(config.output_path, "provenance.json"), provenance)
    return {
        "drop_id": config.drop_id,
        "files": len(results),
        "empty_files": sum(1 for r in results if r["empty"]),
        "bytes_in": sum(r["bytes_in"] for r in results),
        "records_in": sum(r["records_in"] for r in results),
        "documents_out": sum(r["documents_out"] for r in results),
        "bytes_out": sum(r["bytes_out"] for r in results),
        "shards": len(list_files(join_path(config.output_path, "docs"), ".jsonl.gz")),
        "quarantined": sum(reasons.values()),
        "quarantine_reasons": dict(sorted(reasons.items())),
        "duplicate_ids": len(duplicate_ids),
        "seconds": round(time.monotonic() - start, 3),
        "samples": table_markdown(samples),
    }
