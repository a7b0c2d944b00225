"""The data browser: a read-only HTTP server over one prefix (stdlib ``http.server``).

Routes (``<rel>`` is a path relative to the prefix)::

    /                     experiments (from <prefix>/experiments/*.json)
    /experiment/<file>    the steps of one experiment: outputs per partition, status, version
    /browse/<rel>         a folder (status, config, metadata, files) or a file; record shards
                          (jsonl, jsonl.gz, jsonl.zst, parquet) page with ?start=&n=&filter=
    /doc/<rel>?id=ID      one document of a shard: attributes, removal reason, text before/after
    /healthz              "ok"

Only GET and HEAD exist; nothing is ever written. Paths are checked by ``PrefixRoot`` (403 outside
the prefix, 404 when missing).

Bounded: a record page reads only what it shows (``shards``: parquet a data page at a time, JSON
lines over ``MAX_LINE_BYTES`` skipped) and decodes at most ``max_read_bytes`` at once (``--max_read_mib``:
a parquet footer or data page over it is left out, the page saying "Preview truncated" and why); at most ``max_heavy`` record / document pages are served at
once (another waits up to ``HEAVY_WAIT_S`` seconds, then gets 503 with ``Retry-After``); a
connection that sends nothing for ``IDLE_TIMEOUT_S`` seconds (a half-open or idle client) is
closed, so it does not hold a thread forever.

Requests are answered only for the host names the server was started for (``127.0.0.1``,
``localhost``, ``--host`` and every ``--allowed_host``): a page whose ``Host`` header names any other
host -- a DNS-rebinding page of some web site pointing its name at this machine -- gets 421, and so
does an absolute-form request target (``GET http://other.example/...``) for another host. Only
``/healthz`` (which says "ok" and nothing else) answers any host, for probes that send a pod IP.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from marin_assets.browse import pages
from marin_assets.browse.catalog import Catalog, Relations
from marin_assets.browse.filters import FilterError, fields_used, matches_all, parse_filter
from marin_assets.browse.parquet_pages import MAX_READ_BYTES
from marin_assets.browse.paths import Forbidden, PrefixRoot, fresh_filesystem
from marin_assets.browse.shards import ShardPager, shard_format
from marin_assets.execution.status import INFO_FILE, STATUS_FILE

logger = logging.getLogger("marin.browse")

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 200
PREVIEW_BYTES = 256 << 10
MAX_LISTING = 2000
COSTLY_FIELDS = {"removed", "reason"}
LOCAL_HOSTS = ("127.0.0.1", "localhost")
MAX_HEAVY_REQUESTS = 4  # record and document pages served at once (each reads shards)
HEAVY_WAIT_S = 10.0  # how long one more waits for a slot before it gets 503
IDLE_TIMEOUT_S = 20.0  # a connection silent this long is closed


def host_name(authority: str) -> str:
    """The host of a ``Host`` header / URL authority, lower case, without port or brackets."""
    authority = authority.strip().rsplit("@", 1)[-1].lower()
    if authority.startswith("["):  # [IPv6]:port
        return authority[1:].split("]", 1)[0]
    if authority.count(":") == 1:
        authority = authority.split(":", 1)[0]
    return authority.rstrip(".")


@dataclass
class Response:
    status: int
    body: str
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _int(params: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(params.get(name, [default])[0])
    except ValueError as exc:
        raise HttpError(400, f"{name} must be an integer") from exc
    return max(low, min(high, value))


def flat_row(record: dict[str, Any], attributes: dict[str, Any], removal: str | None | bool) -> dict[str, Any]:
    """The fields a filter sees: top-level fields, metadata, attributes, chars, removed/reason."""
    row: dict[str, Any] = {}
    metadata = record.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            row[f"metadata.{key}"] = value
            row.setdefault(key, value)
    row.update(attributes)
    for key, value in attributes.items():
        if isinstance(value, dict):  # a classifier's {label: probability}: one field per label
            del row[key]
            for sub, item in sorted(value.items()):
                row[f"{key}.{sub.removeprefix('__label__')}"] = item
    row.update({k: v for k, v in record.items() if not isinstance(v, dict)})
    if isinstance(record.get("text"), str):
        row["chars"] = len(record["text"])
    if removal is not False:  # False: not computed
        row["removed"] = removal is not None
        row["reason"] = removal or ""
    return row


class BrowserApp:
    """Request handling without the socket part (tests call :meth:`get` directly)."""

    def __init__(
        self,
        prefix: str,
        page_size: int = DEFAULT_PAGE_SIZE,
        allowed_hosts: tuple[str, ...] | list[str] = (),
        max_heavy: int = MAX_HEAVY_REQUESTS,
        heavy_wait_s: float = HEAVY_WAIT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_read_bytes: int = MAX_READ_BYTES,
    ) -> None:
        self.idle_timeout_s = idle_timeout_s
        self.max_read_bytes = max_read_bytes
        self.root = PrefixRoot(prefix)
        self.heavy = threading.BoundedSemaphore(max(1, max_heavy))  # record / document pages at once
        self.max_heavy = max(1, max_heavy)
        self.heavy_wait_s = heavy_wait_s
        self.catalog = Catalog(self.root, max_read_bytes)
        self.pager = ShardPager(max_read_bytes=max_read_bytes)
        self.page_size = page_size
        self.allowed_hosts = frozenset(host_name(h) for h in (*LOCAL_HOSTS, *allowed_hosts) if h)

    def refused_host(self, target: str, host_header: str | None) -> str | None:
        """Why a request for ``target`` with this ``Host`` header is refused, or None when it may be
        served. ``host_header`` None: the request had none (only HTTP/1.0 may omit it)."""
        parts = urlsplit(target)
        if target.startswith("/") and not target.startswith("//"):
            authority = None
        elif parts.scheme in ("http", "https") and parts.netloc:
            authority = parts.netloc
        else:
            return f"request target {target[:100]!r} is neither a path nor an absolute http URL"
        if parts.path == "/healthz":
            return None
        if authority is not None and host_name(authority) not in self.allowed_hosts:
            return f"request target names host {host_name(authority)!r}, which this browser does not serve"
        if host_header is not None and host_name(host_header) not in self.allowed_hosts:
            return (
                f"Host {host_name(host_header)!r} is not one this browser serves "
                f"({', '.join(sorted(self.allowed_hosts))}; add it with --allowed_host)"
            )
        return None

    def handle(self, target: str, host_header: str | None) -> Response:
        """Answer a request from the socket: the ``Host`` check (421), then :meth:`get`."""
        why = self.refused_host(target, host_header)
        if why is not None:
            return self._error(421, why)
        parts = urlsplit(target)
        if not target.startswith("/"):  # absolute form for an allowed host: serve its path
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return self.get(target)

    def get(self, target: str) -> Response:
        """Answer ``GET target`` (path and query)."""
        parts = urlsplit(target)
        params = parse_qs(parts.query)
        path = unquote(parts.path)
        try:
            if path in ("", "/"):
                return Response(200, self.index())
            if path == "/healthz":
                return Response(200, "ok", "text/plain; charset=utf-8")
            route, _, rest = path.lstrip("/").partition("/")
            if route == "experiment":
                return Response(200, self.experiment_page(rest))
            if route == "doc" or (route == "browse" and shard_format(rest) is not None):
                return self._heavy(route, rest, params)
            if route == "browse":
                return Response(200, self.browse_page(rest, params))
            raise HttpError(404, f"no page {path!r}")
        except Forbidden as exc:
            return self._error(403, str(exc))
        except HttpError as exc:
            return self._error(exc.status, str(exc))
        except FilterError as exc:
            return self._error(400, str(exc))
        except FileNotFoundError as exc:
            return self._error(404, f"not found: {exc}")
        except Exception as exc:  # noqa: BLE001 - one bad file must not take the browser down
            logger.exception("error serving %s", target)
            return self._error(500, f"{type(exc).__name__}: {exc}")

    def _heavy(self, route: str, rest: str, params: dict[str, list[str]]) -> Response:
        """A page that reads shards, served while fewer than ``max_heavy`` others are (else 503)."""
        if not self.heavy.acquire(timeout=self.heavy_wait_s):
            response = self._error(503, f"busy: {self.max_heavy} record pages are being served; retry in a few seconds")
            response.headers["Retry-After"] = "5"
            return response
        try:
            page = self.doc_page(rest, params) if route == "doc" else self.browse_page(rest, params)
            return Response(200, page)
        finally:
            self.heavy.release()

    def _error(self, status: int, message: str) -> Response:
        title = f"{status} {HTTPStatus(status).phrase}"
        return Response(status, pages.layout(title, f"<p id='error'>{pages.esc(message)}</p>", self.root.given))

    # -- pages ------------------------------------------------------------------------------

    def index(self) -> str:
        rows = []
        for name, record in self.catalog.experiments():
            rows.append(
                [
                    pages.link("experiment", name, name),
                    pages.esc(record.get("description") or ""),
                    pages.esc(record.get("created_date", "")),
                    pages.esc(record.get("user", "")),
                    pages.esc(len(record.get("steps", []))),
                ]
            )
        body = pages.table(["experiment", "description", "created", "user", "steps"], rows, id="experiments")
        if not rows:
            body = "<p>No experiment records in <code>experiments/</code> yet.</p>"
        return pages.layout(
            "Experiments", body + "<p>" + pages.link("browse", "", "Browse the prefix") + "</p>", self.root.given
        )

    def experiment_page(self, name: str) -> str:
        record = self.catalog.experiment(name)
        if record is None:
            raise HttpError(404, f"no experiment record {name!r}")
        rows = []
        for step in self.catalog.step_rows(record):
            where = (
                pages.link("browse", step["relative"], step["relative"] or "/")
                if step["relative"] is not None
                else pages.esc(step["path"]) + " <span class='muted'>(outside the prefix)</span>"
            )
            rows.append(
                [
                    pages.esc(step["name"]),
                    pages.esc(step["partition"] or ""),
                    pages.esc(step["hash"]),
                    pages.status_cell(step["status"]),
                    where,
                ]
            )
        head = (
            f"<p>{pages.esc(record.get('description') or '')}</p><p class='muted'>created "
            f"{pages.esc(record.get('created_date', ''))} by {pages.esc(record.get('user', ''))}, git "
            f"{pages.esc(record.get('git_commit') or '-')}, run {pages.esc(record.get('run_id', ''))}</p>"
        )
        body = head + pages.table(["step", "partition", "version", "status", "output"], rows, id="steps")
        return pages.layout(f"Experiment {name}", body, self.root.given)

    def browse_page(self, relative: str, params: dict[str, list[str]]) -> str:
        relative = self.root.to_relative(relative)
        url = self.root.resolve(relative)
        fs, path = fresh_filesystem(url)
        if not fs.exists(path):
            raise HttpError(404, f"{relative or '/'} does not exist")
        if fs.isdir(path):
            return self.folder_page(relative, url)
        if shard_format(path):
            return self.records_page(relative, url, params)
        return self.file_page(relative, url)

    def folder_page(self, relative: str, url: str) -> str:
        fs, path = fresh_filesystem(url)
        entries = sorted(
            fs.ls(path, detail=True, refresh=True), key=lambda e: (e.get("type") != "directory", e["name"])
        )
        body = [pages.breadcrumbs(relative)]
        names = {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries}
        if STATUS_FILE in names or INFO_FILE in names:
            body.append(self._output_summary(url))
        rows = []
        for entry in entries[:MAX_LISTING]:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            child = f"{relative}/{name}" if relative else name
            is_dir = entry.get("type") == "directory"
            rows.append(
                [
                    pages.link("browse", child, name + ("/" if is_dir else "")),
                    "folder" if is_dir else ("records" if shard_format(name) else "file"),
                    "" if is_dir else pages.esc(entry.get("size", "")),
                ]
            )
        body.append(pages.table(["name", "kind", "bytes"], rows, id="listing"))
        if len(entries) > MAX_LISTING:
            body.append(f"<p class='muted'>{len(entries) - MAX_LISTING} more entries not shown</p>")
        return pages.layout(relative or "/", "".join(body), self.root.given)

    def _output_summary(self, url: str) -> str:
        info = self.catalog.info(url) or {}
        status = self.catalog.status(url)
        rows = [
            ["status", pages.status_cell(status)],
            ["step", pages.esc(info.get("name", ""))],
            ["version", pages.esc(info.get("hash", ""))],
            ["partition", pages.esc(info.get("partition") or "")],
            ["function", pages.esc(info.get("fn", ""))],
        ]
        config = json.dumps(info.get("config"), indent=2, sort_keys=True, default=str)
        metadata = json.dumps(self.catalog.metadata(url), indent=2, sort_keys=True, default=str)
        return (
            pages.table(["", ""], rows, id="output")
            + f"<details><summary>config</summary><pre>{pages.esc(config)}</pre></details>"
            + f"<details><summary>metadata</summary><pre>{pages.esc(metadata[:20000])}</pre></details>"
        )

    def file_page(self, relative: str, url: str) -> str:
        fs, path = fresh_filesystem(url)
        with fs.open(path, "rb") as handle:
            data = handle.read(PREVIEW_BYTES + 1)
        size = fs.size(path)
        if b"\x00" in data[:4096]:
            shown = f"<p>binary file, {size} bytes</p>"
        else:
            text = data[:PREVIEW_BYTES].decode("utf-8", errors="replace")
            more = f"<p class='muted'>first {PREVIEW_BYTES} of {size} bytes</p>" if len(data) > PREVIEW_BYTES else ""
            shown = f"<pre id='file'>{pages.esc(text)}</pre>{more}"
        return pages.layout(relative, pages.breadcrumbs(relative) + shown, self.root.given)

    # -- records ----------------------------------------------------------------------------

    def _relations(self, url: str) -> Relations | None:
        """Relations of a ``<output>/docs/<shard>`` file (None for other shards)."""
        head, sep, shard = url.rpartition("/docs/")
        if not sep or "/" in shard:
            return None
        return self.catalog.relations(head, shard)

    def records_page(self, relative: str, url: str, params: dict[str, list[str]]) -> str:
        start = _int(params, "start", 0, 0, 1 << 62)
        count = _int(params, "n", self.page_size, 1, MAX_PAGE_SIZE)
        filter_text = params.get("filter", [""])[0]
        conditions = parse_filter(filter_text)
        rel = self._relations(url)
        show_removal = bool(rel and rel.downstream) and (
            bool(fields_used(conditions) & COSTLY_FIELDS) or params.get("show", [""])[0] == "removal"
        )
        joined: dict[str, tuple[dict[str, Any], str | None | bool]] = {}

        def join(batch: list[tuple[int, dict[str, Any]]]) -> None:
            ids = {r.get("id") for _, r in batch if isinstance(r.get("id"), str)} - set(joined)
            attrs = self.catalog.attributes_for(rel, ids) if rel and rel.attributes else {}
            removal = self.catalog.removal(rel, ids, attrs) if show_removal and rel else {}
            for doc_id in ids:
                joined[doc_id] = (attrs.get(doc_id, {}), removal.get(doc_id) if show_removal else False)

        def matches(batch: list[tuple[int, dict[str, Any]]]) -> list[bool]:
            join(batch)
            keep = []
            for _, record in batch:
                attrs, removal = joined.get(record.get("id"), ({}, False))
                keep.append(matches_all(conditions, flat_row(record, attrs, removal)))
            # Only what is shown stays joined: memory is bounded by a page, not by the scan.
            return keep

        page = self.pager.page(url, start, count, matches if conditions else None)
        if not conditions:
            join(page.records)
        rows = []
        for index, record in page.records:
            doc_id = record.get("id")
            attrs, removal = joined.get(doc_id, ({}, False)) if isinstance(doc_id, str) else ({}, False)
            id_cell = (
                pages.link("doc", relative, doc_id, {"id": doc_id, "i": index}) if isinstance(doc_id, str) else "-"
            )
            row = [
                pages.esc(index),
                id_cell,
                f"<div class='text'>{pages.text_preview(record)}</div>",
                pages.attrs_cell(attrs),
            ]
            if show_removal:
                row.append("kept" if removal is None else f"<span class='removed reason'>{pages.esc(removal)}</span>")
            rows.append(row)
        headers = ["#", "id", "text", "attributes"] + (["removed?"] if show_removal else [])
        truncated = "".join(
            f"<p class='truncated'><b>Preview truncated:</b> {pages.esc(note)}</p>" for note in page.notes
        )
        return pages.layout(
            relative,
            self._records_header(relative, url, rel, filter_text, count, start, page)
            + truncated
            + pages.table(headers, rows, id="records"),
            self.root.given,
        )

    def _records_header(self, relative, url, rel, filter_text, count, start, page) -> str:
        out = [pages.breadcrumbs(relative)]
        if rel is not None:
            related = []
            for name, attr_url in rel.attributes:
                related.append(f"attributes: {self._link_or_text(attr_url, name)}")
            for name, up in rel.upstream:
                before = self.root.relative(up)
                if before is not None:
                    related.append(
                        f"input: {pages.link('browse', before, name)} "
                        f"({pages.link('browse', before, 'documents removed by this step', {'filter': 'removed = true'}, id='removed-link')})"
                    )
            for name, down, _ in rel.downstream:
                related.append(f"output: {self._link_or_text(down, name)}")
            if rel.downstream and "show" not in filter_text:
                related.append(
                    pages.link("browse", relative, "show kept/removed", {"show": "removal", "filter": filter_text})
                )
            if related:
                out.append("<ul id='related'>" + "".join(f"<li>{r}</li>" for r in related) + "</ul>")
        out.append(
            "<form method='get' id='filter-form'>filter <input id='filter-input' name='filter' size='50' "
            f"value='{pages.esc(filter_text)}' placeholder='quality < 0.5 and duplicate = true'>"
            f"<input type='hidden' name='n' value='{count}'><button id='filter-apply' type='submit'>apply</button></form>"
        )
        nav = []
        base = {"n": count, "filter": filter_text}
        if start > 0:
            nav.append(pages.link("browse", relative, "first page", {**base, "start": 0}, id="first-page"))
            if not filter_text:
                nav.append(
                    pages.link("browse", relative, "previous", {**base, "start": max(0, start - count)}, id="prev-page")
                )
        if not page.at_end:
            nav.append(pages.link("browse", relative, "next", {**base, "start": page.next_start}, id="next-page"))
        span = f"records {start}–{page.next_start - 1}" if page.next_start > start else "no more records"
        nav.append(f"<span id='page-info' class='muted'>{span}, {len(page.records)} shown, {page.scanned} read</span>")
        out.append("<p class='pager'>" + " ".join(nav) + "</p>")
        return "".join(out)

    def _link_or_text(self, url: str, label: str) -> str:
        relative = self.root.relative(url)
        return pages.link("browse", relative, label) if relative is not None else pages.esc(label)

    # -- one document ------------------------------------------------------------------------

    def doc_page(self, relative: str, params: dict[str, list[str]]) -> str:
        relative = self.root.to_relative(relative)
        doc_id = params.get("id", [""])[0]
        if not doc_id:
            raise HttpError(400, "id is required")
        url = self.root.resolve(relative)
        record = self._find(url, doc_id, params)
        if record is None:
            raise HttpError(404, f"no document {doc_id!r} in {relative}")
        rel = self._relations(url)
        attrs = self.catalog.attributes_for(rel, {doc_id}).get(doc_id, {}) if rel else {}
        removal = self.catalog.removal(rel, {doc_id}, {doc_id: attrs}) if rel else {}
        text = record.get("text") if isinstance(record.get("text"), str) else ""
        body = [pages.breadcrumbs(relative)]
        if rel and rel.downstream:
            reason = removal.get(doc_id)
            verdict = "kept" if reason is None else f"removed — {reason}"
            # Each name links to that step's output (its status and config: the filters it applied).
            names = ", ".join(self._link_or_text(down.rsplit("/docs/", 1)[0], n) for n, down, _ in rel.downstream)
            body.append(
                f"<p id='removed-by'>In {names}: <b id='removal-reason' class='{'removed' if reason else ''}'>{pages.esc(verdict)}</b></p>"
            )
        attr_rows = [[pages.esc(k), pages.esc(pages.short_json(v, 2000))] for k, v in sorted(attrs.items())]
        body.append(
            "<h2>Attributes</h2>"
            + (pages.table(["attribute", "value"], attr_rows, id="attributes") if attr_rows else "<p>none</p>")
        )
        columns = []
        for name, up in rel.upstream if rel else []:
            before = self._find(up, doc_id, {})
            if before is not None:
                columns.append((f"Before: {name}", before.get("text", ""), "before-text"))
        columns.append(("This output", text, "doc-text"))
        after_text = None
        for name, down, _ in rel.downstream if rel else []:
            after = self._find(down, doc_id, {})
            if after is not None:
                after_text = after.get("text", "")
                columns.append((f"After: {name}", after_text, "after-text"))
        cols = "".join(
            f"<div><h3>{pages.esc(title)}</h3><pre id='{key}'>{pages.esc(str(value)[:100_000])}</pre></div>"
            for title, value, key in columns
        )
        body.append(f"<h2>Text</h2><div class='cols'>{cols}</div>")
        if after_text is not None and after_text != text:
            body.append(
                f"<h2>Diff (this output → after)</h2><pre id='diff'>{pages.esc(pages.text_diff(text, after_text))}</pre>"
            )
        fields = json.dumps({k: v for k, v in record.items() if k != "text"}, indent=2, ensure_ascii=False, default=str)
        body.append(f"<h2>Fields</h2><pre id='fields'>{pages.esc(fields)}</pre>")
        return pages.layout(f"Document {doc_id}", "".join(body), self.root.given)

    def _find(self, url: str, doc_id: str, params: dict[str, list[str]]) -> dict[str, Any] | None:
        """The record ``doc_id`` of a shard (the ``i`` hint jumps straight to its page)."""
        from marin_assets.browse.catalog import find_records

        if "i" in params:
            index = _int(params, "i", 0, 0, 1 << 62)
            page = self.pager.page(url, index, 1)
            if page.records and page.records[0][1].get("id") == doc_id:
                return page.records[0][1]
        return find_records(url, {doc_id}, max_read_bytes=self.max_read_bytes).get(doc_id)


def make_handler(app: BrowserApp) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to ``app`` (GET/HEAD only)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "marin-browse"
        # The socket timeout of every read: a client that opens a connection and sends nothing
        # (or stops half-way through its request) is disconnected, and its thread ends.
        timeout = app.idle_timeout_s

        def _send(self, with_body: bool) -> None:
            host = self.headers.get("Host")
            if host is None and self.request_version != "HTTP/1.0":
                response = app._error(400, "an HTTP/1.1 request needs a Host header")
            else:
                response = app.handle(self.path, host)
            data = response.body.encode("utf-8")
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if with_body:
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._send(True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._send(False)

        def _refuse(self) -> None:
            self.send_error(405, "read-only browser: only GET and HEAD")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base
            logger.info("%s %s", self.address_string(), format % args)

    return Handler
