"""What the browser knows about a prefix: experiments, step outputs, and how outputs relate.

Read-only. Experiments come from ``<prefix>/experiments/*.json`` (written by ``executor_main`` and
by runs launched from Dagster); a step output's status, info and metadata from its ``.executor_*``
files (``execution.status``). The outputs of an output's experiments are the candidates for its
relations; an output no record lists takes them from its own ``.executor_info`` instead
(:meth:`Catalog.derived_siblings`).

Relations of a document shard ``<output>/docs/<shard>`` are found from the outputs' resolved
configs (``.executor_info``), so they follow the data, not a hard-coded list of stages:

* **attributes**: outputs of the same experiment (and partition) holding ``attributes/<shard>`` --
  or, for Marin's attribute steps (an ``attribute_name`` in their config), ``docs/<shard>`` -- whose
  config names this output or its input, or that this output's config names (co-sharded
  attribute files: ``{id, attributes: {...}}``, same shard name);
* **upstream**: outputs this output's config names that hold ``docs/<shard>`` (text *before*);
* **downstream**: outputs whose config names this output and hold ``docs/<shard>`` (text *after*;
  a document missing there was removed);
* **quarantine**: records with an ``id`` in ``quarantine/`` or ``removed/`` files of the
  downstream outputs (``{id, reason, detail}``), which say why a document did not come through.

Every path taken from a record or a config is confined to the prefix (``PrefixRoot.confine``)
before anything is read from it: an output outside the prefix is listed as such, never opened.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from marin_assets.browse.parquet_pages import MAX_READ_BYTES, LayoutCache
from marin_assets.browse.paths import Forbidden, PrefixRoot, fresh_filesystem
from marin_assets.browse.shards import PARQUET_BATCH_ROWS, LineSource, ParquetRows, parse_line, shard_format
from marin_assets.core.parquet_layout import ParquetTooLarge
from marin_assets.execution.status import INFO_FILE, METADATA_FILE, STATUS_FILE, read_info, read_metadata, read_status
from marin_assets.execution.storage import join_path, read_bytes

EXPERIMENTS_DIR = "experiments"
REASON_DIRS = ("quarantine", "removed")
_TTL_S = 10.0
MAX_ID_SETS = 4  # id sets of downstream shards kept (one shard's ids: a few MB at most)
MAX_DERIVED_SIBLINGS = 200  # step folders looked at beside an output no experiment record lists


@dataclass
class Relations:
    """How one document shard of one output relates to other outputs (full paths)."""

    output: str
    shard: str
    info: dict[str, Any] | None
    attributes: list[tuple[str, str]] = field(default_factory=list)  # (step name, attribute shard)
    upstream: list[tuple[str, str]] = field(default_factory=list)  # (step name, docs shard)
    downstream: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (name, shard, info)


def config_paths(info: dict[str, Any] | None) -> set[str]:
    """Every string in an ``.executor_info`` config (paths of the outputs it reads, among others)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.add(value.rstrip("/"))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk((info or {}).get("config"))
    return found


def iter_records(url: str, max_read_bytes: int = MAX_READ_BYTES) -> Iterable[dict[str, Any]]:
    """Records of a shard, streamed (never the whole shard in memory, nor more than ``max_read_bytes``
    decoded at once)."""
    fs, path = fresh_filesystem(url)  # gcsfs sizes a file from its cached listing: a rewritten shard
    kind = shard_format(path)
    if kind == "parquet":
        # Within the read limit, as a page is: a column over it reads "[not shown: ...]"; a footer over
        # it, no record at all.
        with fs.open(path, "rb") as handle:
            try:
                rows = ParquetRows(handle, fs.size(path), max_read_bytes, LayoutCache(), (path, ""))
            except ParquetTooLarge:
                return
            for _, record in rows.rows(0, PARQUET_BATCH_ROWS):
                yield record
        return
    source = LineSource(fs, path, None, None)
    try:
        for index, line in enumerate(source.lines()):
            yield parse_line(line, index)
    finally:
        source.close()


def find_records(
    url: str, ids: set[str], field_name: str = "id", max_read_bytes: int = MAX_READ_BYTES
) -> dict[str, dict[str, Any]]:
    """Records of ``url`` whose ``id`` is in ``ids`` (streams; stops once all are found)."""
    found: dict[str, dict[str, Any]] = {}
    if not ids:
        return found
    try:
        for record in iter_records(url, max_read_bytes):
            key = record.get(field_name)
            if isinstance(key, str) and key in ids and key not in found:
                found[key] = record
                if len(found) == len(ids):
                    break
    except FileNotFoundError:
        pass
    return found


class Catalog:
    """Cached, read-only views of one prefix (cache entries live ``_TTL_S`` seconds)."""

    def __init__(self, root: PrefixRoot, max_read_bytes: int = MAX_READ_BYTES) -> None:
        self.root = root
        self.max_read_bytes = max_read_bytes
        self._cache: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._id_sets: OrderedDict[Any, frozenset[str]] = OrderedDict()

    def inside(self, path: str, name: str = "") -> bool:
        """Whether ``path`` (and ``path/name``) lies below the prefix: the one test every path read
        from a record or config passes before it is opened."""
        return self.root.confine(path) is not None and (
            not name or self.root.confine(join_path(path, name)) is not None
        )

    def _cached(self, key: Any, compute: Any, ttl: float = _TTL_S, max_entries: int = 512) -> Any:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < ttl:
                self._cache.move_to_end(key)
                return hit[1]
        value = compute()
        with self._lock:
            self._cache[key] = (now, value)
            while len(self._cache) > max_entries:
                self._cache.popitem(last=False)
        return value

    # -- experiments ----------------------------------------------------------------------

    def experiment_names(self) -> list[str]:
        """File names of the experiment records, newest first."""

        def compute() -> list[str]:
            if not self.inside(join_path(self.root.prefix, EXPERIMENTS_DIR)):  # a symlink leading out
                return []
            fs, path = fresh_filesystem(join_path(self.root.prefix, EXPERIMENTS_DIR))
            try:
                entries = fs.ls(path, detail=True)
            except FileNotFoundError:
                return []
            files = [
                e
                for e in entries
                if e.get("type") == "file"
                and e["name"].endswith(".json")
                and not e["name"].rstrip("/").rsplit("/", 1)[-1].startswith((".", "_"))  # a killed writer's temp
            ]
            files.sort(key=lambda e: e.get("mtime") or e.get("updated") or "", reverse=True)
            return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in files]

        return self._cached(("experiments",), compute)

    def experiment(self, name: str) -> dict[str, Any] | None:
        """One experiment record (None when missing or unreadable)."""
        if "/" in name or not name.endswith(".json"):
            return None

        def compute() -> dict[str, Any] | None:
            try:
                data = read_bytes(self.root.resolve(f"{EXPERIMENTS_DIR}/{name}"))
            except Forbidden:  # a record that is a symlink leading out of the prefix
                return None
            try:
                record = json.loads(data) if data is not None else None
            except ValueError:
                return None
            return record if isinstance(record, dict) else None

        return self._cached(("experiment", name), compute)

    def experiments(self) -> list[tuple[str, dict[str, Any]]]:
        """(file name, record) of every readable experiment record."""
        return [(n, r) for n in self.experiment_names() if (r := self.experiment(n)) is not None]

    def step_rows(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The steps of an experiment with their outputs (per partition) and status."""
        rows = []
        partitions = record.get("partitions") or {}
        for step in record.get("steps", []):
            if not isinstance(step, dict):
                continue
            output = str(step.get("output_path", ""))
            keys = partitions.get(step.get("partitioned_by") or "", []) if step.get("partitioned_by") else [None]
            for key in keys:
                path = join_path(output, str(key)) if key else output
                inside = self.inside(path)
                status = self.status(path) if inside else "-"
                rows.append(
                    {
                        "name": step.get("name"),
                        "hash": step.get("hash"),
                        "partition": key,
                        "path": path,
                        "relative": self.root.relative(path) if inside else None,
                        "status": status,
                        "description": step.get("description"),
                    }
                )
        return rows

    def status(self, output: str) -> str:
        """SUCCESS / FAILED / RUNNING / DEP_FAILED, or ``-`` when the output never started."""
        if not self.inside(output, STATUS_FILE):
            return "-"
        return self._cached(("status", output), lambda: getattr(read_status(output), "status", "-"), ttl=2.0)

    def info(self, output: str) -> dict[str, Any] | None:
        """The ``.executor_info`` of an output (cached; None outside the prefix)."""
        if not self.inside(output, INFO_FILE):
            return None
        info = self._cached(("info", output), lambda: read_info(output))
        return info if isinstance(info, dict) else None

    def metadata(self, output: str) -> dict[str, Any]:
        """What the step returned for ``output`` (empty outside the prefix)."""
        return read_metadata(output) if self.inside(output, METADATA_FILE) else {}

    # -- relations ------------------------------------------------------------------------

    def sibling_outputs(self, output: str) -> list[tuple[str, str]]:
        """(step name, output path) of every step of the experiments that contain ``output``,
        at the same partition; for an output no experiment record lists, the outputs its own
        ``.executor_info`` leads to (see :meth:`derived_siblings`)."""
        info = self.info(output) or {}
        partition = info.get("partition")
        step_output = output.rstrip("/").rsplit("/", 1)[0] if partition else output.rstrip("/")
        found = self._recorded_siblings(output, step_output, partition)
        if not found:
            found = self.derived_siblings(output)
        return [(name, path) for path, name in found.items()]

    def derived_siblings(self, output: str) -> dict[str, str]:
        """``path -> step name`` of the outputs related to ``output`` by their ``.executor_info``
        alone (an output computed where no experiment record was written): the outputs its config
        names (its input, attribute outputs) and the step outputs beside its own step's folder
        (``<prefix>/curation/*``), at the same partition. :meth:`relations` keeps those whose
        configs name each other."""
        info = self.info(output) or {}
        partition = info.get("partition")
        step_output = output.rstrip("/").rsplit("/", 1)[0] if partition else output.rstrip("/")
        # Strings of the config that are paths (absolute or URLs); confined to the prefix below.
        candidates = [p for p in sorted(config_paths(info)) if "://" in p or p.startswith("/")]
        parent = step_output.rsplit("/", 1)[0]
        if self.inside(parent):
            fs, listed = fresh_filesystem(parent)
            try:
                entries = fs.ls(listed, detail=True)
            except (FileNotFoundError, NotADirectoryError):
                entries = []
            dirs = sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")
            for name in dirs[:MAX_DERIVED_SIBLINGS]:
                base = join_path(parent, name)
                candidates.append(join_path(base, str(partition)) if partition else base)
                if partition:
                    candidates.append(base)  # a partition-free step beside partitioned ones
        found: dict[str, str] = {}
        for path in candidates:
            path = path.rstrip("/")
            if path == output.rstrip("/") or path in found or not self.inside(path):
                continue
            sibling = self.info(path)
            if sibling is not None and isinstance(sibling.get("name"), str):
                found[path] = sibling["name"]
        return found

    def _recorded_siblings(self, output: str, step_output: str, partition: Any) -> dict[str, str]:
        """``path -> step name`` of the steps of the experiment records that list ``step_output``."""
        found: dict[str, str] = {}
        for _, record in self.experiments():
            steps = [
                s for s in record.get("steps", []) if isinstance(s, dict) and isinstance(s.get("output_path"), str)
            ]
            if not any(s["output_path"].rstrip("/") == step_output for s in steps):
                continue
            for s in steps:
                base = s["output_path"].rstrip("/")
                path = join_path(base, str(partition)) if (partition and s.get("partitioned_by")) else base
                if path != output.rstrip("/") and self.inside(path):  # a record naming outside: ignored
                    found.setdefault(path, str(s.get("name", path)))
        return found

    def relations(self, output: str, shard: str) -> Relations:
        """Attributes, upstream and downstream shards of ``<output>/docs/<shard>``."""

        def compute() -> Relations:
            info = self.info(output)
            mine = config_paths(info)
            inputs = {p for p in mine if p != output.rstrip("/")}
            rel = Relations(output=output, shard=shard, info=info)
            for name, path in self.sibling_outputs(output):
                theirs = config_paths(self.info(path))
                names_me = output.rstrip("/") in theirs
                attr = join_path(path, f"attributes/{shard}")
                docs = join_path(path, f"docs/{shard}")
                if (path in mine or names_me or theirs & inputs) and self._exists(attr):
                    rel.attributes.append((name, attr))
                if path in inputs and self._exists(docs):
                    rel.upstream.append((name, docs))
                if names_me and self._exists(docs):
                    rel.downstream.append((name, docs, self.info(path) or {}))

            # Marin's attribute steps (inference, dedupe: an ``attribute_name`` in their config) mirror
            # the documents' layout: their ``docs/<shard>`` holds attribute records, not documents.
            for entries in (rel.upstream, rel.downstream):
                for entry in [e for e in entries if self._attribute_step(e[1])]:
                    entries.remove(entry)
                    rel.attributes.append((entry[0], entry[1]))
            return rel

        return self._cached(("relations", output, shard), compute)

    def _attribute_step(self, docs_url: str) -> bool:
        """Whether ``<output>/docs/<shard>`` belongs to a step that writes attributes in Marin's layout."""
        info = self.info(docs_url.rsplit("/docs/", 1)[0]) or {}
        return "attribute_name" in (info.get("config") or {})

    def attributes_for(self, rel: Relations, ids: set[str]) -> dict[str, dict[str, Any]]:
        """``id -> {attribute: value}`` merged over the co-sharded attribute files."""
        merged: dict[str, dict[str, Any]] = {}
        for _, url in rel.attributes:
            for doc_id, record in find_records(url, ids, max_read_bytes=self.max_read_bytes).items():
                attrs = record.get("attributes")
                if isinstance(attrs, dict):
                    merged.setdefault(doc_id, {}).update(attrs)
        return merged

    def downstream_ids(self, url: str) -> frozenset[str]:
        """Ids present in a downstream shard (streamed once, cached by the shard's fingerprint)."""
        fs, path = fresh_filesystem(url)
        info = fs.info(path)
        key = (url, info.get("size"), info.get("mtime") or info.get("updated"))
        with self._lock:
            if key in self._id_sets:
                self._id_sets.move_to_end(key)
                return self._id_sets[key]
        ids = frozenset(r["id"] for r in iter_records(url, self.max_read_bytes) if isinstance(r.get("id"), str))
        with self._lock:
            self._id_sets[key] = ids
            while len(self._id_sets) > MAX_ID_SETS:
                self._id_sets.popitem(last=False)
        return ids

    def reason_records(self, output: str, ids: set[str]) -> dict[str, dict[str, Any]]:
        """Quarantine / removal records (with an ``id``) of ``output`` for ``ids``."""
        found: dict[str, dict[str, Any]] = {}
        for sub in REASON_DIRS:
            if not self.inside(join_path(output, sub)):
                continue
            fs, path = fresh_filesystem(join_path(output, sub))
            try:
                entries = fs.ls(path, detail=True)
            except FileNotFoundError:
                continue
            for entry in entries:
                name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
                if entry.get("type") != "file" or shard_format(name) is None:
                    continue
                if not self.inside(join_path(output, f"{sub}/{name}")):
                    continue
                for doc_id, record in find_records(
                    join_path(output, f"{sub}/{name}"), ids - set(found), max_read_bytes=self.max_read_bytes
                ).items():
                    found[doc_id] = record
        return found

    def removal(self, rel: Relations, ids: set[str], attributes: dict[str, dict[str, Any]]) -> dict[str, str | None]:
        """``id -> reason`` for documents missing from every downstream output (None: kept).

        Empty when the output has no downstream docs to compare with.
        """
        if not rel.downstream:
            return {}
        out: dict[str, str | None] = {}
        missing = set(ids)
        for _, url, _ in rel.downstream:
            missing -= self.downstream_ids(url)
        for doc_id in ids - missing:
            out[doc_id] = None
        if not missing:
            return out
        recorded: dict[str, dict[str, Any]] = {}
        for _, url, _ in rel.downstream:
            recorded.update(self.reason_records(url.rsplit("/docs/", 1)[0], missing - set(recorded)))
        for doc_id in missing:
            if doc_id in recorded:
                rec = recorded[doc_id]
                out[doc_id] = f"{rec.get('reason', 'quarantined')}: {rec.get('detail', '')}".strip().rstrip(":")
            else:
                out[doc_id] = explain_removal(attributes.get(doc_id, {}), rel.downstream[0][2], rel.downstream[0][0])
        return out

    def _exists(self, url: str) -> bool:
        """``url`` exists below the prefix (asked of the store, never of a cached listing)."""
        if not self.inside(url):
            return False
        fs, path = fresh_filesystem(url)
        try:
            return bool(fs.exists(path))
        except OSError:
            return False


def explain_removal(attributes: dict[str, Any], downstream_info: dict[str, Any], downstream_name: str) -> str:
    """Why a document with these attributes is missing from a downstream filter step.

    Reads the filter step's own ``filters`` (``consolidate``'s ``FilterConfig`` list: ``classify``
    thresholds, ``remove_docs``, ``remove_spans``); a stage that writes removal records
    (``removed/``) is reported from those instead.
    """
    config = downstream_info.get("config") or {}
    reasons = []
    spans_removed = False
    for filt in config.get("filters") or []:
        if not isinstance(filt, dict):
            continue
        kind, name, label = str(filt.get("type")), filt.get("name"), filt.get("label")
        value = attributes.get(name) if name else None
        if kind == "classify":
            score = value.get(label) if isinstance(value, dict) and label else value
            low = filt.get("threshold", filt.get("lower_threshold"))
            if isinstance(score, int | float) and isinstance(low, int | float) and score < low:
                reasons.append(f"low quality: {name}{f'[{label}]' if label else ''} = {score} < {low}")
        elif kind == "remove_docs" and value:
            of = attributes.get(f"{name}_of")
            similarity = attributes.get("fuzzy_similarity")
            reasons.append(f"fuzzy duplicate of {of} (similarity {similarity})" if of else f"removed by {name}")
        elif kind == "remove_spans" and value:
            spans_removed = True
    if not reasons and spans_removed:
        reasons.append("nothing left after removing duplicate paragraphs")
    return "; ".join(reasons) or f"not in {downstream_name} (no recorded reason)"
