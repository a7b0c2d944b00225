"""A Hugging Face hub-compatible HTTP server on 127.0.0.1, for tests and benchmarks (never the internet).

It answers the requests ``huggingface_hub`` 0.36 makes (read from its source: ``HfApi.repo_info`` /
``dataset_info`` / ``model_info``, ``hf_hub_download`` / ``snapshot_download``'s ``HEAD`` then
``GET`` with ``Range`` to resume, and ``HfApi.list_repo_tree``):

* ``GET /api/{datasets|models}/{repo}`` and ``/api/{type}/{repo}/revision/{rev}`` (``?blobs=True``):
  ``{"id", "sha", "siblings": [{"rfilename", "size", "blobId", "lfs"}], ...}``;
* ``GET /api/{type}/{repo}/tree/{rev}[/{path}]`` (``?recursive=true``): the file entries;
* ``HEAD`` / ``GET /datasets/{repo}/resolve/{rev}/{path}`` (models: ``/{repo}/resolve/...``) with the
  headers the client reads -- ``X-Repo-Commit``, ``ETag`` (the sha256 of the content for "LFS"
  files, a git-style sha1 otherwise), ``Content-Length``, ``Accept-Ranges`` -- and ``206`` with
  ``Content-Range`` for a ``Range: bytes=N-`` request.

A revision is a branch name (``main``), a full commit or a commit prefix of 7+ characters; an
unknown repository is ``404`` with ``X-Error-Code: RepoNotFound``, an unknown revision
``RevisionNotFound``, a missing file ``EntryNotFound`` (the codes ``hf_raise_for_status`` maps to
its errors). ``requests`` lists what was asked (method, path, Range); ``cut_after`` makes the next
``GET`` of a file stop after that many bytes (a dropped connection, for resume tests).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import socket
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlparse

LFS_THRESHOLD = 1024  # files of this size and above are served as LFS files (sha256 ETag), as on the hub


@dataclass
class Repo:
    """One repository: its branches and, per commit, its files."""

    repo_id: str
    repo_type: str
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        if revision in self.branches:
            return self.branches[revision]
        if revision in self.commits:
            return revision
        if len(revision) >= 7:
            found = [c for c in self.commits if c.startswith(revision)]
            if len(found) == 1:
                return found[0]
        return None


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _sibling(path: str, data: bytes) -> dict:
    entry: dict = {"rfilename": path, "size": len(data), "blobId": _git_sha1(data)}
    if len(data) >= LFS_THRESHOLD:
        entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
    return entry


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest() if len(data) >= LFS_THRESHOLD else _git_sha1(data)


class HubServer:
    """The server (a thread in this process). ``add_repo`` publishes files; ``url`` is ``HF_ENDPOINT``."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.cut_after: int | None = None
        self._lock = threading.Lock()
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add_repo(self, repo_id: str, files: dict[str, bytes], repo_type: str = "dataset", branch: str = "main") -> str:
        """Publish ``files`` as a new commit on ``branch``; returns the commit (40 hex digits)."""
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        commit = digest.hexdigest()
        with self._lock:
            repo = self.repos.setdefault((repo_type, repo_id), Repo(repo_id, repo_type))
            repo.commits[commit] = dict(files)
            repo.branches[branch] = commit
        return commit

    def files_requested(self) -> list[str]:
        """Paths of the file GETs served so far."""
        return [path for method, path, _ in self.requests if method == "GET" and "/resolve/" in path]

    # -- serving ------------------------------------------------------------------------------

    def start(self) -> HubServer:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
                pass

            def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
                server._handle(self, head=True)

            def do_GET(self) -> None:  # noqa: N802
                server._handle(self, head=False)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _repo(self, repo_type: str, repo_id: str) -> Repo | None:
        with self._lock:
            return self.repos.get((repo_type, repo_id))

    def _handle(self, handler: http.server.BaseHTTPRequestHandler, head: bool) -> None:
        parsed = urlparse(handler.path)
        path = unquote(parsed.path)
        with self._lock:
            self.requests.append(("HEAD" if head else "GET", path, handler.headers.get("Range")))
        try:
            if path.startswith("/api/"):
                self._api(handler, path[len("/api/") :], parse_qs(parsed.query), head)
            else:
                self._resolve(handler, path.lstrip("/"), head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _send(handler, status: int, body: bytes, headers: dict[str, str] | None = None, head: bool = False) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if not head:
            handler.wfile.write(body)

    def _error(self, handler, code: str, message: str, head: bool) -> None:
        body = json.dumps({"error": message}).encode()
        self._send(
            handler,
            404,
            body,
            {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"},
            head,
        )

    def _api(self, handler, rest: str, query: dict[str, list[str]], head: bool) -> None:
        match = re.fullmatch(r"(datasets|models)/([^/]+/[^/]+|[^/]+)(?:/(revision|tree)/([^/]+)(?:/(.*))?)?", rest)
        if match is None:
            self._send(handler, 404, b"{}", {"Content-Type": "application/json"}, head)
            return
        plural, repo_id, kind, revision, subpath = match.groups()
        repo = self._repo(plural[:-1], repo_id)
        if repo is None:
            self._error(handler, "RepoNotFound", f"Repository {repo_id} not found", head)
            return
        commit = repo.resolve(revision or "main")
        if commit is None:
            self._error(handler, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return
        files = repo.commits[commit]
        if kind == "tree":
            base = (subpath or "").strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries = []
            for name in sorted(files):
                if base and not name.startswith(base + "/"):
                    continue
                rel = name[len(base) + 1 :] if base else name
                if not recursive and "/" in rel:
                    continue
                data = files[name]
                entry = {"type": "file", "oid": _git_sha1(data), "size": len(data), "path": name}
                if len(data) >= LFS_THRESHOLD:
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            self._send(handler, 200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, head)
            return
        info = {
            "id": repo_id,
            "sha": commit,
            "private": False,
            "siblings": [_sibling(name, files[name]) for name in sorted(files)],
        }
        if repo.repo_type == "model":
            info["modelId"] = repo_id
        self._send(handler, 200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)

    def _resolve(self, handler, rest: str, head: bool) -> None:
        repo_type = "model"
        if rest.startswith("datasets/"):
            repo_type, rest = "dataset", rest[len("datasets/") :]
        match = re.fullmatch(r"([^/]+/[^/]+|[^/]+)/resolve/([^/]+)/(.+)", rest)
        if match is None:
            self._send(handler, 404, b"", head=head)
            return
        repo_id, revision, name = match.groups()
        repo = self._repo(repo_type, repo_id)
        if repo is None:
            self._error(handler, "RepoNotFound", f"Repository {repo_id} not found", head)
            return
        commit = repo.resolve(revision)
        if commit is None:
            self._error(handler, "RevisionNotFound", f"Invalid rev id: {revision}", head)
            return
        data = repo.commits[commit].get(name)
        if data is None:
            self._error(handler, "EntryNotFound", f"{name} does not exist on {revision}", head)
            return
        headers = {
            "X-Repo-Commit": commit,
            "ETag": f'"{_etag(data)}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        start = 0
        wanted = handler.headers.get("Range")
        status = 200
        if wanted:
            found = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if found:
                start = int(found.group(1))
                end = int(found.group(2)) if found.group(2) else len(data) - 1
                if start >= len(data):
                    self._send(handler, 416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                    return
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                data = data[start : end + 1]
                status = 206
        cut = None
        if not head:
            with self._lock:
                cut, self.cut_after = self.cut_after, None
        if cut is None:
            self._send(handler, status, data, headers, head)
            return
        # A dropped connection: the promised length, fewer bytes, then close.
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(data[:cut])
        handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
