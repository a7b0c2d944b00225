"""Is the output store there? One quick look before a run, so a dead store fails in seconds.

An object-store client retries a failing request for a minute or more (gcsfs: 6 retries with
back-off, each logging a traceback) -- right for a blip, wrong for a store that cannot be reached at
all: a host name that does not resolve (offline, a typo, no DNS), a port where nothing listens. So
before a run touches an object store, :func:`check_store` resolves the store's endpoint and opens
one TCP connection to it, with a timeout of a few seconds; when that fails the run stops with
:class:`StoreUnreachableError`, one line naming the store's host, this runner's host and the steps
that were about to run. A reachable endpoint is remembered for a minute (one probe per run, not
per step).

Behind an HTTP(S) proxy (``$HTTPS_PROXY`` and friends set) no probe is made: a direct connection
would prove nothing. What this does not cover: a store that accepts connections and then fails requests (the client's
retries still apply) -- and a store that dies in the middle of a run (the step's own storage calls
fail, after the client's retries, and the step is recorded FAILED where the status can be written).
"""

from __future__ import annotations

import os
import socket
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
    return parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)


def _probe(host: str, port: int, timeout_s: float) -> str | None:
    """None when a TCP connection to ``host:port`` opens within ``timeout_s``; else why not."""
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
                return None
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
    endpoint = endpoint_of(prefix)
    if endpoint is None:
        return
    seen = _reachable.get(endpoint)
    if seen is not None and time.monotonic() - seen < _REACHABLE_FOR_S:
        return
    why = _probe(*endpoint, timeout_s)
    if why is not None:
        raise StoreUnreachableError(
            f"cannot reach the store of {prefix} from host {host_id()}: {endpoint[0]} -- {why}; "
            f"{_steps_text(steps)} not started"
        )
    _reachable[endpoint] = time.monotonic()
