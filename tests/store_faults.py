"""Real sockets on loopback that misbehave like a sick object store, for the storage fault tests.

* :class:`SilentStore` accepts TCP connections and never sends a byte (a hung server, a
  black-holed load balancer): what a client without timeouts waits on forever.
* :class:`FlakyProxy` is an HTTP proxy in front of the repo's GCS server (``tests/gcs_server.py``)
  that forwards every request and relays the answer -- except that, after forwarding a conditional
  write (an upload or delete with ``ifGenerationMatch``) that *succeeded*, it may answer 503
  instead: the write landed, the client is told it did not. ``every=N`` does so for every N-th
  such write (deterministic), ``probability=p`` at random (seeded). ``silent = True`` makes it
  stop answering anything (a store that dies in the middle of a run).

Point gcsfs at either with ``STORAGE_EMULATOR_HOST=<url>``.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection", "upgrade"}
_UNAVAILABLE = b'{"error": {"code": 503, "message": "injected: service unavailable"}}'


class SilentStore:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)  # kept open, never read from or written to

    def __enter__(self) -> SilentStore:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            conn.close()
        self._sock.close()


class FlakyProxy:
    """An HTTP proxy to ``upstream`` that answers 503 after some conditional writes succeeded."""

    def __init__(self, upstream: str, every: int = 0, probability: float = 0.0, seed: int = 0) -> None:
        self.upstream = urllib.parse.urlparse(upstream)
        self.every = every
        self.probability = probability
        self.silent = False
        self.conditional_writes = 0
        self.injected = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body() if self.command not in ("GET", "HEAD") else b""
                if proxy.silent:
                    threading.Event().wait(3600)  # never answers (the test ends the server)
                    return
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | {"host"}}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                status, reply_headers = response.status, response.getheaders()
                upstream.close()
                if 200 <= status < 300 and proxy._inject(self.command, self.path):
                    status, data = 503, _UNAVAILABLE
                    reply_headers = [("Content-Type", "application/json")]
                self.send_response(status)
                for key, value in reply_headers:
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _inject(self, method: str, path: str) -> bool:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(path).query)
        if method not in ("POST", "DELETE") or "ifGenerationMatch" not in query:
            return False
        with self._lock:
            self.conditional_writes += 1
            hit = (self.every and self.conditional_writes % self.every == 0) or (
                self.probability and self._random.random() < self.probability
            )
            if hit:
                self.injected += 1
            return bool(hit)

    def __enter__(self) -> FlakyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
