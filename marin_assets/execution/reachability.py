"""Is the output store there? One quick look before a run, so a dead store fails in seconds.

An object-store client retries a failing request for a minute or more (gcsfs: 6 retries with
back-off, each logging a traceback) -- right for a blip, wrong for a store that cannot be reached at
all: a host name that does not resolve (offline, a typo, no DNS), a port where nothing listens. So
before a run touches an object store, :func:`check_store` resolves the store's endpoint and opens
one TCP connection to it, with a timeout of a few seconds; when that fails the run stops with
:class:`StoreUnreachableError`, one line naming the store's host, this runner's host and the steps
that were about to run. A reachable endpoint is remembered for a minute (one probe per run, not
per step).

The probe also asks the endpoint one HTTP question (``HEAD /``, over TLS for https) and waits for the
first line of an answer within the same few seconds: a store that accepts connections but never
answers (a hung server, a black-holed load balancer) fails the same way, instead of hanging the run.

Behind an HTTP(S) proxy (``$HTTPS_PROXY`` and friends set) no probe is made: a direct connection
would prove nothing. A store that stops answering in the middle of a run is bounded by the request
timeout of every storage call (:func:`marin_resources.storage.storage_timeout_s`); a step that fails
so has :func:`explain` add this one-line diagnosis to its error.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
import urllib.parse
from collections.abc import Sequence

from marin_assets.execution.status import host_id
from marin_assets.execution.storage import filesystem, is_local

PROBE_TIMEOUT_S = 5.0
_REACHABLE_FOR_S = 60.0
_reachable: dict[tuple[str, int], float] = {}
_PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)  # (host, port) -> monotonic time of the last good probe


class StoreUnreachableError(RuntimeError):
    """The output store cannot be reached (or written, for a local folder) from this host."""


def _steps_text(steps: Sequence[str]) -> str:
    if not steps:
        return "the run"
    shown = ", ".join(steps[:3])
    return f"step {shown}" + (f" (+{len(steps) - 3} more)" if len(steps) > 3 else "")


def endpoint_of(prefix: str) -> tuple[str, int] | None:
    """``(host, port)`` the client of ``prefix``'s store connects to; None for local / in-memory stores."""
    found = _endpoint(prefix)
    return None if found is None else (found[0], found[1])


def _endpoint(prefix: str) -> tuple[str, int, bool] | None:
    """``(host, port, tls)`` of ``prefix``'s store; None for local / in-memory stores."""
    if is_local(prefix) or prefix.startswith("memory://"):
        return None
    fs, _ = filesystem(prefix)
    location = getattr(fs, "_location", None)  # gcsfs: the API endpoint (an emulator's included)
    if not isinstance(location, str):
        endpoint = getattr(fs, "endpoint_url", None) or (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url")
        location = endpoint if isinstance(endpoint, str) else None
    if not location:
        return None
    parsed = urllib.parse.urlparse(location if "://" in location else f"https://{location}")
    if not parsed.hostname:
        return None
    tls = parsed.scheme == "https"
    return parsed.hostname, parsed.port or (443 if tls else 80), tls


def _answers(sock: socket.socket, host: str, tls: bool, deadline: float) -> str | None:
    """None when the endpoint behind the connected ``sock`` answers an HTTP request before ``deadline``."""
    try:
        if tls:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        sock.sendall(f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while b"\r\n" not in answer and len(answer) < 256:
            chunk = sock.recv(256)
            if not chunk:
                break
            answer += chunk
        if not answer:
            return "it closed the connection without answering"
        status = answer.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        if len(status) > 1 and status[1].isdigit() and int(status[1]) >= 500:
            # Every request would get the same, after a minute of the client's retries.
            return f"it answers {' '.join(status[1:]).strip()}"
    except TimeoutError:
        return "it accepts connections but sent no answer in time"
    except OSError as exc:
        return f"it accepts connections but the request failed ({exc.strerror or exc})"
    return None


def _probe(host: str, port: int, timeout_s: float, tls: bool = False) -> str | None:
    """None when a TCP connection to ``host:port`` opens and the endpoint answers an HTTP request
    within ``timeout_s`` (in all); else why not."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"its host name does not resolve ({exc.strerror or exc})"
    last = "no address"
    deadline = time.monotonic() + timeout_s
    for family, kind, proto, _, address in addresses:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(left)
                sock.connect(address)
                why = _answers(sock, host, tls, deadline)
                return None if why is None else f"{why} (port {port}, a {timeout_s:g}s probe)"
        except OSError as exc:
            last = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
    return f"no connection to {host}:{port} ({last})"


def check_store(prefix: str, steps: Sequence[str] = (), timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise :class:`StoreUnreachableError` (one line) when ``prefix``'s store cannot be used from here.

    Object stores only: the endpoint's name must resolve and a TCP connection open within
    ``timeout_s``. (A full local disk is reported where a write fails: by the step, in one line.)
    """
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return  # the client goes through a proxy: a direct connection proves nothing either way
    found = _endpoint(prefix)
    if found is None:
        return
    endpoint = (found[0], found[1])
    seen = _reachable.get(endpoint)
    if seen is not None and time.monotonic() - seen < _REACHABLE_FOR_S:
        return
    why = _probe(found[0], found[1], timeout_s, tls=found[2])
    if why is not None:
        raise StoreUnreachableError(
            f"cannot reach the store of {prefix} from host {host_id()}: {endpoint[0]} -- {why}; "
            f"{_steps_text(steps)} not started"
        )
    _reachable[endpoint] = time.monotonic()


def explain(prefix: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """After a storage call under ``prefix`` failed: one line saying the store does not answer
    (probed now, not from the cache), or None when it answers or is not an object store."""
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None
    found = _endpoint(prefix)
    if found is None:
        return None
    why = _probe(found[0], found[1], timeout_s, tls=found[2])
    if why is None:
        return None
    _reachable.pop((found[0], found[1]), None)
    return f"the store {found[0]} does not answer from host {host_id()}: {why}"
