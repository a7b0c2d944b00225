"""Links into the data browser from elsewhere (Dagster asset metadata). No browser import needed.

The browser's base URL comes from ``$MARIN_BROWSER_URL`` (e.g. the Kubernetes service address),
else ``http://127.0.0.1:<DEFAULT_PORT>`` -- where ``python -m marin_assets.browse`` listens.
"""

from __future__ import annotations

import os
from urllib.parse import quote

DEFAULT_PORT = 8765
BROWSER_URL_ENV = "MARIN_BROWSER_URL"


def browser_base_url() -> str:
    """``$MARIN_BROWSER_URL`` without a trailing slash, or the local default."""
    return (os.environ.get(BROWSER_URL_ENV) or f"http://127.0.0.1:{DEFAULT_PORT}").rstrip("/")


def browser_url(output_path: str, prefix: str, base_url: str | None = None) -> str | None:
    """The browser page of ``output_path`` (a folder below ``prefix``), or None when outside it."""
    root = prefix.rstrip("/")
    path = output_path.rstrip("/")
    if path == root:
        relative = ""
    elif path.startswith(root + "/"):
        relative = path[len(root) + 1 :]
    else:
        return None
    return f"{(base_url or browser_base_url()).rstrip('/')}/browse/{quote(relative, safe='/')}"
