"""``python -m marin_assets.browse --prefix DIR|gs://bucket/path [--host H] [--port P] [--allowed_host NAME ...] [--max_heavy N] [--idle_timeout_s S]``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from http.server import ThreadingHTTPServer

from marin_assets.browse.links import DEFAULT_PORT
from marin_assets.browse.server import (
    DEFAULT_PAGE_SIZE,
    IDLE_TIMEOUT_S,
    MAX_HEAVY_REQUESTS,
    BrowserApp,
    make_handler,
)
from marin_resources.storage import default_prefix


def main(argv: Sequence[str] | None = None, prog: str = "python -m marin_assets.browse") -> None:
    """Serve the data browser until interrupted. ``prog``: the program its usage names (``marin browse``
    passes its own)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Read-only browser of a Marin prefix (experiments, outputs, records)"
    )
    parser.add_argument("--prefix", default=None, help="root to browse (default: $MARIN_PREFIX or ./data)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--page_size", type=int, default=DEFAULT_PAGE_SIZE, help="records per page")
    parser.add_argument(
        "--allowed_host",
        action="append",
        default=[],
        help="a host name people reach the browser by (an Ingress or Service name), besides 127.0.0.1, "
        "localhost and --host; requests naming any other Host are refused (421). Repeatable.",
    )
    parser.add_argument(
        "--max_heavy", type=int, default=MAX_HEAVY_REQUESTS, help="record/document pages served at once (else 503)"
    )
    parser.add_argument(
        "--idle_timeout_s", type=float, default=IDLE_TIMEOUT_S, help="close a connection silent this long"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    prefix = args.prefix or default_prefix()
    server = ThreadingHTTPServer(
        (args.host, args.port),
        make_handler(
            BrowserApp(
                prefix,
                args.page_size,
                [args.host, *args.allowed_host],
                max_heavy=args.max_heavy,
                idle_timeout_s=args.idle_timeout_s,
            )
        ),
    )
    server.daemon_threads = True
    host, port = server.server_address[:2]
    print(f"marin data browser: http://{host}:{port}/  (prefix {prefix})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    sys.exit(0)


if __name__ == "__main__":
    main()
